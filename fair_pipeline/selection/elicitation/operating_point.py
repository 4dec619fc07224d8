"""Group-wise TPR / TNR of a scorer at its operating threshold, from labelled counts (the rates a fair
metric of Definition 4 is a function of).

Input: one row per scored unit (e.g. an item) with its group, its score and how many positive and negative
labelled examples it stands for (n_pos, n_neg). The classifier is h = 1[score >= t].

Threshold rule (`selection_threshold`): a fixed selection rate q. Sort the examples by score, highest first;
t is the score of the ceil(q N)-th example (N = all examples, every group), so at least a share q of the
examples is selected (ties at t are all selected). A fixed rate makes candidates comparable: each spends the
same "budget" of positive decisions, as the top slots of a ranking would.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

COUNT_COLUMNS = ("group", "score", "n_pos", "n_neg")


def _check(frame: pd.DataFrame) -> None:
    missing = [c for c in COUNT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"labelled counts lack columns {missing}; expected {list(COUNT_COLUMNS)}")
    if not np.isfinite(frame["score"].to_numpy(dtype=float)).all():
        bad = frame.loc[~np.isfinite(frame["score"].to_numpy(dtype=float)), "group"].value_counts().to_dict()
        raise ValueError(f"non-finite scores in the labelled counts (rows per group: {bad})")
    counts = frame[["n_pos", "n_neg"]].to_numpy(dtype=float)
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise ValueError("n_pos and n_neg must be finite non-negative counts")


def selection_threshold(frame: pd.DataFrame, selection_rate: float) -> float:
    """The score t at which h = 1[score >= t] selects (at least) `selection_rate` of all examples."""
    if not 0.0 < selection_rate <= 1.0:
        raise ValueError(f"selection_rate={selection_rate!r} must be in (0, 1]")
    _check(frame)
    scores = frame["score"].to_numpy(dtype=float)
    weight = frame["n_pos"].to_numpy(dtype=float) + frame["n_neg"].to_numpy(dtype=float)
    total = weight.sum()
    if total <= 0:
        raise ValueError("no labelled examples: cannot place a threshold")
    order = np.argsort(-scores, kind="stable")
    cumulative = np.cumsum(weight[order])
    position = int(np.searchsorted(cumulative, np.ceil(selection_rate * total - 1e-9)))
    return float(scores[order][min(position, len(order) - 1)])


def group_rates(frame: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per group: tpr = P(h=1 | Y=1, G=g), tnr = P(h=0 | Y=0, G=g), with n_pos / n_neg (NaN rate when a
    class is absent) and the share of the group's examples selected."""
    _check(frame)
    selected = frame["score"].to_numpy(dtype=float) >= threshold
    parts = frame.assign(tp=np.where(selected, frame["n_pos"], 0), tn=np.where(selected, 0, frame["n_neg"]),
                         sel=np.where(selected, frame["n_pos"] + frame["n_neg"], 0))
    g = parts.groupby("group", sort=True)[["tp", "tn", "sel", "n_pos", "n_neg"]].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        out = pd.DataFrame({
            "group": g.index.astype(str),
            "tpr": np.where(g["n_pos"] > 0, g["tp"] / g["n_pos"], np.nan),
            "tnr": np.where(g["n_neg"] > 0, g["tn"] / g["n_neg"], np.nan),
            "n_pos": g["n_pos"].to_numpy(dtype=np.int64),
            "n_neg": g["n_neg"].to_numpy(dtype=np.int64),
            "selected_share": g["sel"] / (g["n_pos"] + g["n_neg"]),
        })
    return out.reset_index(drop=True)
