"""What partitions read of the item catalogues, as parts for `platform.read_history`: the fingerprint of each delivery
and the code that loaded them, and which of those parts a window of days reads (the delivery holding on each day)."""
from __future__ import annotations

from fair_pipeline.ingestion.catalogue_dates import holding_delivery
from fair_pipeline.platform.read_history import CODE, carried_since, code_of, previous_parts

DELIVERY = "delivery "
DELIVERY_FINGERPRINTS = "delivery_fingerprints"


def catalogue_parts(by_delivery: dict[str, str], code: str | None) -> dict[str, str | None]:
    """The parts of a materialization of the catalogues: {CODE: its code version, "delivery D": D's fingerprint}."""
    return {CODE: code, **{DELIVERY + day: fingerprint for day, fingerprint in by_delivery.items()}}


def recorded_catalogue_parts(materialization) -> dict[str, str | None]:
    """The parts of a materialization recorded before their history was (its delivery fingerprints and code)."""
    recorded = materialization.metadata.get(DELIVERY_FINGERPRINTS)
    return catalogue_parts(recorded.value if recorded is not None else {}, code_of(materialization))


def parts_read_by(recorded: dict[str, list], window: list[str]) -> list[str]:
    """The parts `window`'s days read: the code, the delivery holding on each day, and any removed delivery that would
    hold on one of them (what the day read changed when it went)."""
    days = {name: value for name, (value, _) in recorded.items() if name.startswith(DELIVERY)}
    present = [name[len(DELIVERY):] for name, value in days.items() if value is not None]
    removed = [name[len(DELIVERY):] for name, value in days.items() if value is None]
    read = {CODE}
    for day in window:
        held = holding_delivery(day, present)
        if held is not None:
            read.add(DELIVERY + held)
        read.update(DELIVERY + gone for gone in removed if holding_delivery(day, [*present, gone]) == gone)
    return sorted(read & set(recorded))


def catalogue_read_since(instance, key, by_delivery: dict[str, str], code: str | None) -> dict[str, list]:
    """The `read_history` record of a new materialization of the catalogues (asset `key` in the Dagster `instance`),
    following the newest one (the pool lets one run at a time write the catalogues)."""
    return carried_since(catalogue_parts(by_delivery, code), *previous_parts(instance, key, recorded_catalogue_parts))
