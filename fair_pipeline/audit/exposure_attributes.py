"""Exposure parity of the logged ranking by protected attribute and by their crossing (glue; the math is
`audit.stats.exposure` and `audit.stats.exposure_intersections`).

The attributes are columns of the items table (`$FAIR_PIPELINE_GROUP_COLUMNS`, e.g. `gender,age_band`): the
catalogue of the audited day is read once (catalogue-sized), each item gets its cell per table (the value of one
attribute, or the JSON array of every attribute's value for the crossing), and `exposure_sql` groups the window's
impressions by their item's cell with the same two SQL passes as the logged group_id. Each attribute is audited on
its own, then all of them crossed; a cell with fewer than `min_cell` impressions, fewer than `min_clicks` clicks or
fewer than two clusters is not estimable, with the reason, and stays in the table. A missing attribute value (NULL,
or an impression whose item is not in the catalogue) is the value `<unknown>`, as the audit does for group_id.
"""
from __future__ import annotations

import pandas as pd

from fair_pipeline.audit.attribute_cells import (
    attribute_tables,
    catalogue_attributes,
    group_label,
    item_cells,
    table_name,
)
from fair_pipeline.audit.exposure_sql import logged_exposure_parity
from fair_pipeline.audit.stats.exposure import ExposureParity
from fair_pipeline.audit.stats.exposure_intersections import DEFAULT_MIN_CELL, flag_small_cells
from fair_pipeline.platform.engines import as_warehouse
from fair_pipeline.platform.windows import PartitionWindow

TABLE = "fairness_audit_exposure_cells"


def cells_frame(name: str, columns: list[str], result: ExposureParity) -> pd.DataFrame:
    """One row per group or cell of one table: its exposure / merit with CI and its ratio to the table's reference."""
    pairs = result.pairs.set_index("group")
    groups = result.per_group.rename(columns={"n_clusters": "items", "n_clusters_2": "requests"})
    ratio = pairs.reindex(groups["group"])
    frame = groups.assign(
        attributes=name, cell=groups["group"], label=[group_label(columns, g) for g in groups["group"]],
        reference=group_label(columns, result.reference),
        ratio=ratio["ratio"].to_numpy(), ratio_ci_low=ratio["ci_low"].to_numpy(),
        ratio_ci_high=ratio["ci_high"].to_numpy(), ratio_df=ratio["df"].to_numpy(), p_holm=ratio["p_holm"].to_numpy(),
        margin=ratio["margin"].to_numpy(), verdict=ratio["verdict"].to_numpy(),
        variance_estimand=result.variance_estimand)
    is_reference = frame["cell"] == result.reference
    frame.loc[is_reference, "verdict"] = "reference"
    pair_notes = ratio["note"].to_numpy() if "note" in ratio else None
    if pair_notes is not None:
        frame["note"] = [n if isinstance(n, str) and n else (p if isinstance(p, str) else n)
                         for n, p in zip(frame["note"], pair_notes)]
    return frame.drop(columns=["group"])


def attribute_exposure(con, window: PartitionWindow, examination, columns: list[str], *,
                       min_cell: int = DEFAULT_MIN_CELL, **options) -> pd.DataFrame:
    """The rows of `marts.fairness_audit_exposure_cells` for the logged ranking over `window`: each of `columns`
    on its own, then their crossing (when there are several), two-way clustered on items and requests."""
    engine = as_warehouse(con)
    items = catalogue_attributes(engine, window.last, columns)
    frames = []
    for cols in attribute_tables(columns):
        item_groups, unknown = item_cells(items, cols)
        result = logged_exposure_parity(engine, window, examination, item_groups=item_groups, unknown_group=unknown,
                                        **options)
        frames.append(cells_frame(table_name(cols), cols, flag_small_cells(result, min_cell)))
    return pd.concat(frames, ignore_index=True)
