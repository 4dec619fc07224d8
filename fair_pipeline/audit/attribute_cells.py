"""Which groups an audit table has when the protected attributes are columns of the items table (glue).

`$FAIR_PIPELINE_GROUP_COLUMNS` (e.g. `gender,age_band`) names the attributes. Each is audited on its own (a
marginal table), then all of them crossed (one table, when there are several). An item's group in a marginal
table is its attribute's value; in the crossed table it is the JSON array of its values (`cell_key`), so any text
(quotes, separators, non-Latin scripts) keys exactly one cell and is never parsed back or used as an identifier.
A missing value (NULL, or an item the catalogue does not hold) is `<unknown>`, as the audit does for group_id.
The exposure audit (`audit.exposure_attributes`) and the AUC / xAUC / pairwise audit of cells
(`audit.cell_audit`) both take their cells from here.
"""
from __future__ import annotations

import json

import pandas as pd

from fair_pipeline.audit.sql import ITEMS_VIEW, UNKNOWN_GROUP, AuditDataError
from fair_pipeline.audit.stats.exposure_intersections import CROSS, cell_key, cell_label
from fair_pipeline.ingestion.catalogue_dates import items_as_of
from fair_pipeline.platform.warehouse import quote_identifier


def catalogue_attributes(engine, day, columns: list[str]) -> pd.DataFrame:
    """item_id and `columns` (as text, NULL as `<unknown>`) of the catalogue that holds on `day`."""
    present = engine.table_columns(ITEMS_VIEW)
    missing = [c for c in columns if c not in present]
    if missing:
        raise AuditDataError(f"group columns {missing} are not columns of the items table "
                             f"({'.'.join(ITEMS_VIEW)} has {sorted(c for c in present if not c.startswith('_'))})")
    items, params = items_as_of(engine, day)
    cols = ", ".join(f"CAST({quote_identifier(c)} AS VARCHAR) AS {quote_identifier(c)}" for c in columns)
    frame = engine.query_df(f"SELECT DISTINCT CAST(item_id AS VARCHAR) AS item_id, {cols} FROM {items} "
                            "WHERE item_id IS NOT NULL", params)
    return frame.astype(object).where(frame.notna(), UNKNOWN_GROUP)


def attribute_tables(columns: list[str]) -> list[list[str]]:
    """The audit tables of `columns`: each attribute on its own, then their crossing (when there are several)."""
    return [[c] for c in columns] + ([list(columns)] if len(columns) > 1 else [])


def table_name(columns: list[str]) -> str:
    """A table's name in the stored rows and the report: "gender", or "gender × age_band" for the crossing."""
    return CROSS.join(columns)


def item_cells(items: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, str]:
    """(item_id, grp) of one table, and the group of an item the catalogue does not hold."""
    if len(columns) == 1:
        return items[["item_id"]].assign(grp=items[columns[0]].astype(str)), UNKNOWN_GROUP
    keys = [cell_key(row) for row in items[columns].itertuples(index=False)]
    return items[["item_id"]].assign(grp=keys), cell_key([UNKNOWN_GROUP] * len(columns))


def group_label(columns: list[str], group: str) -> str:
    """How a group of a table reads: "gender=F", or "gender=F · age_band=65+" for a crossed cell's key."""
    return cell_label(columns, [group] if len(columns) == 1 else json.loads(group))
