"""Since when an unpartitioned asset has given later partitions the same inputs, from its newest materialization alone.

Every ingestion materializes the item catalogues (and the views over them), so their history grows with the number
of ingestions, while what a partition reads of them changes rarely (a new catalogue delivery, new code). Each such
materialization records the parts of what it gives (a delivery's fingerprint, the code version), each with the storage
id of the oldest materialization since which that part has had this value (`None`: the materialization itself),
carried forward from the materialization before it. `run` then learns from one record since when the parts a window
reads are unchanged, however long the history is.
"""
from __future__ import annotations

READ_SINCE = "read_since"
CODE = "code"


def carried_since(parts: dict[str, str | None], previous: dict[str, list] | None,
                  previous_storage_id: int | None) -> dict[str, list]:
    """{part: [value, since]} of a new materialization from `parts` and the previous one's record. A part whose value
    is unchanged keeps the previous since; a new or changed part starts here (None). A part the previous record had
    and this one lacks is kept with the value None: it was removed here, which changes what read it."""
    previous = previous or {}
    recorded = {}
    for name in sorted({*parts, *previous}):
        value = parts.get(name)
        if name in previous and previous[name][0] == value:
            recorded[name] = [value, previous[name][1] if previous[name][1] is not None else previous_storage_id]
        else:
            recorded[name] = [value, None]
    return recorded


def previous_parts(instance, key, parts_of) -> tuple[dict[str, list] | None, int | None]:
    """The newest materialization of asset `key` in the Dagster `instance` as ({part: [value, since]}, storage id); a
    record from before these were recorded gives `parts_of(materialization)`, each part since that record. (None,
    None): never materialized."""
    records = instance.get_asset_records([key])
    newest = records[0].asset_entry.last_materialization_record if records else None
    if newest is None:
        return None, None
    materialization = newest.asset_materialization
    recorded = materialization.metadata.get(READ_SINCE)
    if recorded is not None:
        return recorded.value, newest.storage_id
    return {name: [value, None] for name, value in parts_of(materialization).items()}, newest.storage_id


def since_of(recorded: dict[str, list], name: str, storage_id: int) -> int:
    """The storage id since which part `name` of the materialization `storage_id` (recorded as `recorded`) is unchanged."""
    since = recorded[name][1]
    return storage_id if since is None else since


def code_of(materialization) -> str | None:
    """The code version Dagster tagged a materialization with."""
    return (materialization.tags or {}).get("dagster/code_version")
