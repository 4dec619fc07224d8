"""Exposure parity over several attributes: each attribute on its own and their crossing, side by side.

A catalogue often carries several protected attributes (gender, age band, region); a ranking can treat each
attribute's groups fairly on average and still under-expose a crossed cell (Fairlearn's multiple sensitive
features, TFMA's crossed slices). `exposure_parity_by_attributes` runs `exposure_parity` once per attribute and once
on the crossing of all of them (a cell's key is the JSON array of its values, e.g. `["F", "65+"]`, so any text, quotes
or separators included, keys one cell only and never has to be parsed back; `cell_label` shows it as
"gender=F · age=65+"),
with one minimum cell size: a cell with fewer impressions than ``min_cell`` or fewer clicks than ``min_clicks`` is
reported as not estimable, with the reason, and stays in the table. `side_by_side` stacks the per-group tables
with the attribute(s) each row belongs to.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.exposure import DEFAULT_MIN_CLICKS, ExposureParity, exposure_parity
from fair_pipeline.audit.stats.equivalence import NOT_ESTIMABLE
from fair_pipeline.audit.stats.validation import AuditInputError

CROSS = " × "
DEFAULT_MIN_CELL = 100  # impressions a cell needs before its exposure is estimated


def cell_key(values) -> str:
    """The key of a crossed cell: the JSON array of its values (unambiguous whatever the values' text)."""
    return json.dumps([str(v) for v in values], ensure_ascii=False)


def cell_label(columns, values) -> str:
    """How a cell reads in a report: "gender=F · age=65+" (display only; the key is `cell_key`)."""
    return " · ".join(f"{c}={v}" for c, v in zip(columns, values))


def _labels(attributes: pd.DataFrame, columns: list[str]) -> np.ndarray:
    if len(columns) == 1:
        return attributes[columns[0]].to_numpy(dtype=object)
    return np.array([cell_key(row) for row in attributes[columns].itertuples(index=False)], dtype=object)


def flag_small_cells(result: ExposureParity, min_cell: int) -> ExposureParity:
    """Cells with fewer than `min_cell` impressions: not estimable, in both tables, with the reason."""
    small = result.per_group["n"] < min_cell
    if not small.any():
        return result
    per_group = result.per_group.copy()
    reason = f"fewer than {min_cell} impressions (minimum cell size)"
    per_group.loc[small, "note"] = [f"not estimable: {n} impressions, {reason}" for n in per_group.loc[small, "n"]]
    per_group.loc[small, "estimable"] = False
    for column in ("exposure_over_merit", "se_log", "ci_low", "ci_high", "df"):
        per_group.loc[small, column] = np.nan
    tiny = set(per_group.loc[small, "group"])
    pairs = result.pairs.copy()
    hit = pairs["group"].isin(tiny) | pairs["reference"].isin(tiny)
    for column in ("ratio", "ci_low", "ci_high", "log_ratio", "se_log", "df", "p_value", "p_holm", "p_tost"):
        pairs.loc[hit, column] = np.nan
    pairs.loc[hit, "verdict"] = NOT_ESTIMABLE
    pairs.loc[hit, "note"] = reason
    return ExposureParity(per_group, pairs, result.reference, result.variance_estimand, result.confidence,
                          result.margin, list(result.notes))


def exposure_parity_by_attributes(positions, clicks, attributes: pd.DataFrame, examination, *, crossed: bool = True,
                                  min_cell: int = DEFAULT_MIN_CELL, min_clicks: int = DEFAULT_MIN_CLICKS,
                                  **options) -> dict[str, ExposureParity]:
    """{attribute: result} for each column of ``attributes`` (one row per impression), plus
    {"a × b": result} of their crossing when ``crossed`` and there are several. ``options`` go to `exposure_parity`
    (clusters, examination_covariance, pairs, confidence, margin, ranked_positions); the reference of each table is
    its largest group or cell. Holm runs within each table."""
    if not isinstance(attributes, pd.DataFrame) or attributes.shape[1] == 0:
        raise AuditInputError("attributes must be a DataFrame with one column per protected attribute")
    if options.get("reference") is not None:
        raise AuditInputError("reference= names one group; each attribute's table uses its largest group")
    columns = [str(c) for c in attributes.columns]
    frame = attributes.set_axis(columns, axis=1).reset_index(drop=True)
    missing = {c: int(frame[c].isna().sum()) for c in columns if frame[c].isna().any()}
    if missing:
        raise AuditInputError(f"attributes have missing values {missing}; label them (e.g. 'unknown') to audit them")
    tables = [[c] for c in columns] + ([columns] if crossed and len(columns) > 1 else [])
    out = {}
    for cols in tables:
        result = exposure_parity(positions, clicks, _labels(frame, cols), examination, min_clicks=min_clicks, **options)
        out[CROSS.join(cols)] = flag_small_cells(result, min_cell)
        if len(cols) > 1:  # the crossed table keeps every attribute's value as its own column, and a readable label
            values = frame[cols].drop_duplicates()
            values = values.assign(group=_labels(values, cols),
                                   label=[cell_label(cols, row) for row in values.itertuples(index=False)])
            out[CROSS.join(cols)].per_group = out[CROSS.join(cols)].per_group.merge(values, on="group", how="left")
    return out


def side_by_side(results: dict[str, ExposureParity]) -> pd.DataFrame:
    """Every table's per-group rows stacked, with `attributes` (the table) and each group's ratio to that table's
    reference and verdict: the marginal tables first, then the crossing."""
    frames = []
    for name, result in results.items():
        pairs = result.pairs.set_index("group")[["ratio", "ci_low", "ci_high", "verdict"]].add_prefix("ratio_")
        pairs = pairs.rename(columns={"ratio_ratio": "ratio", "ratio_verdict": "verdict"})
        frame = result.per_group.join(pairs, on="group")
        frame.loc[frame["group"] == result.reference, "verdict"] = "reference"
        frames.append(frame.assign(attributes=name, reference=result.reference))
    columns = ["attributes", "group", "n", "clicks", "exposure", "merit", "exposure_over_merit", "ci_low", "ci_high",
               "reference", "ratio", "ratio_ci_low", "ratio_ci_high", "verdict", "estimable", "note"]
    stacked = pd.concat(frames, ignore_index=True)
    return stacked[[c for c in columns if c in stacked.columns]
                   + [c for c in stacked.columns if c not in columns]]
