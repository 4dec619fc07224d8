"""Helpers shared by the position-bias estimators: input checks, warnings that name positions, chained weights."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from fair_pipeline.position_bias.aggregates import PositionBiasInputError


class PositionBiasWarning(UserWarning):
    """A position whose weight is not estimable (NaN) or a questionable setting; the message says which."""


def warn_note(notes: list[str], message: str) -> None:
    notes.append(message)
    warnings.warn(message, PositionBiasWarning, stacklevel=3)


def policy_rows(frame: pd.DataFrame, policy: str, what: str) -> pd.DataFrame:
    rows = frame[frame["policy"] == policy]
    if rows.empty or rows["impressions"].sum() == 0:
        present = sorted(frame.loc[frame["impressions"] > 0, "policy"].unique().tolist())
        raise PositionBiasInputError(
            f"no {policy!r} impressions in the {what}; this estimator needs {policy} traffic "
            f"(policies present: {present or 'none'})"
        )
    return rows


def check_positions(rows: pd.DataFrame, policy: str) -> int:
    by_position = rows.groupby("position")[["impressions", "clicks"]].sum()
    by_position = by_position[by_position["impressions"] > 0]
    if len(by_position) < 2:
        raise PositionBiasInputError(
            f"{policy} traffic shows only position(s) {by_position.index.tolist()}; position bias needs at least two"
        )
    if by_position["clicks"].sum() == 0:
        raise PositionBiasInputError(
            f"{policy} traffic has 0 clicks in {int(by_position['impressions'].sum())} impressions at every position;"
            " no weight is estimable"
        )
    if 1 not in by_position.index:
        raise PositionBiasInputError(f"{policy} traffic has no impressions at position 1, the reference of every weight")
    if by_position.loc[1, "clicks"] == 0:
        raise PositionBiasInputError(
            f"{policy} traffic has 0 clicks at position 1 (the reference; {int(by_position.loc[1, 'impressions'])}"
            " impressions); no weight is estimable"
        )
    return int(by_position.index.max())


def position_ranges(positions: list[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7' so that one warning can name many positions."""
    spans: list[list[int]] = []
    for p in positions:
        if spans and p == spans[-1][1] + 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def positions_text(positions: list[int]) -> str:
    return ("positions " if len(positions) > 1 else "position ") + position_ranges(positions)


def chain_weights(log_eta: np.ndarray, final_var: np.ndarray, partial_var: np.ndarray, truncate: int | None):
    """log ŵ_J = Σ_{j=2}^{min(J,T)} log η_j and its variance Σ_{i<J} final_i + partial_J (NaN after a gap)."""
    k = len(log_eta)
    t = k if truncate is None else min(truncate, k)
    log_w = np.concatenate([[0.0], np.cumsum(log_eta[1:t])])  # NaN propagates down the chain
    var = np.concatenate([[0.0], np.cumsum(final_var[: t - 1])]) + partial_var[:t]
    log_w = np.concatenate([log_w, np.repeat(log_w[-1], k - t)])
    var = np.concatenate([var, np.repeat(var[-1], k - t)])
    return log_w, np.where(np.isnan(log_w), np.nan, var)


def report_chain_break(first_break: int | None, notes: list[str]) -> None:
    if first_break is not None:
        warn_note(notes, f"weights from position {first_break} down are not estimable (NaN): the chain of ratios breaks there")
