"""Click-log simulator of Nandy et al. (section 2.2), vectorized and deterministic.

Population (per item i):
    C_i ~ Bernoulli(p_group)                          (group "1" w.p. 0.7, group "0" otherwise)
    Y_i(1) | C_i=c ~ Bernoulli(p_relevant[c])         (0.35 for c=0, 0.45 for c=1)
    R_i = 0.6*Y + 2*C + 0.5*Z + (1-C)*(1+Y)*U         Z ~ N(0, 1), U ~ Uniform[0, 1]
The paper writes N(0.6Y + 2C, 0.5); we read 0.5 as a STANDARD DEVIATION, and likewise the score noise
N(0, 0.2) as a standard deviation (both are knobs: `relevance_sd`, `score_noise_sd`).

More groups (`groups=K` > 2): C_i in 0..K-1 with probabilities `group_shares` (default equal), relevance
P(Y=1 | C=c) from `group_relevance` (default evenly spaced from p_relevant_group0 to p_relevant_group1), the
term `group_effects[c]` in place of 2*C (default evenly spaced from 0 to group_effect), the uniform part for
c = 0 only, as with two groups. `group_labels` names them (default "0".."K-1"). With `group_attributes`
(JSON {attribute: [values]}) the K groups are the crossed cells of several attributes and each item carries one
catalogue column per attribute (labels default to "gender=F · age=65+"). Lists are ";"-separated
strings, so that one flag per knob works on the command line. With K = 2 and no lists the draws are the
paper's, bit for bit.

Items carry features from which R is derived: f0 = 0.6Y + 2C + 0.5Z (the Gaussian part),
f1 = (1-C)(1+Y)U (the uniform part), f2.. = N(0, 1) distractors; R = f0 + f1 exactly, so the
production ranker is the linear scorer with coefficients (1, 1, 0, ...), which a retrained ranker can
re-learn from clicks.

Traffic for each request: K items drawn without replacement, each scored s = R + N(0, score_noise_sd),
production order = descending s. Policies: `production` shows that order; `shuffle` shows a uniform
random permutation; `adjacent_swap` swaps one uniformly chosen adjacent pair (j, j+1). A displayed item
at position j is clicked with probability Y(1) * w_j.

Determinism: the population depends only on `seed`; a day depends only on (seed, date), so the same
seed gives byte-identical days whichever range is simulated.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import numpy as np
import pandas as pd

from fair_pipeline.ingestion.simulation_config import SimulationConfig


def bias_curve(config: SimulationConfig) -> np.ndarray:
    """True w_j = P(Y(j)=1 | Y(1)=1) for j = 1..K (index 0 is position 1)."""
    j = np.arange(1, config.slots + 1, dtype=float)
    if config.bias_curve == "log2":
        return 1.0 / np.log2(1.0 + j)
    return (1.0 / j) ** config.power_eta


def simulate_items(config: SimulationConfig) -> pd.DataFrame:
    """The item population with its ground truth (`relevance` = Y(1), `merit_score` = R)."""
    rng = np.random.default_rng([config.seed, 0])
    n = config.n_items
    if config.paper_groups:
        group = (rng.random(n) < config.p_group).astype(np.int16)
    else:
        group = np.searchsorted(np.cumsum(config.group_shares_array), rng.random(n), side="right")
        group = np.minimum(group, config.groups - 1).astype(np.int16)
    p_rel = config.group_relevance_array[group]
    relevance = (rng.random(n) < p_rel).astype(np.int8)
    gaussian_part = (
        config.relevance_effect * relevance + config.group_effects_array[group]
        + config.relevance_sd * rng.standard_normal(n)
    )
    uniform_part = (group == 0) * (1 + relevance) * rng.random(n)
    distractors = rng.standard_normal((n, config.n_features - 2))
    width = len(str(n - 1))
    frame = pd.DataFrame(
        {
            "item_id": [f"item-{i:0{width}d}" for i in range(n)],
            "group_id": np.array(config.group_label_list, dtype=object)[group],
            "relevance": relevance,
            "merit_score": gaussian_part + uniform_part,
            "f0": gaussian_part,
            "f1": uniform_part,
        }
    )
    for k in range(config.n_features - 2):
        frame[f"f{k + 2}"] = distractors[:, k]
    names, cells = config.attribute_cells
    for j, name in enumerate(names):  # protected attributes: catalogue columns, not features
        frame[name] = np.array([cell[j] for cell in cells], dtype=object)[group]
    return frame


def production_coefficients(config: SimulationConfig) -> np.ndarray:
    """Coefficients of the production ranker on the item features: R = f0 + f1."""
    coef = np.zeros(config.n_features)
    coef[:2] = 1.0
    return coef


def _day_rng(config: SimulationConfig, day: dt.date, stream: int) -> np.random.Generator:
    return np.random.default_rng([config.seed, day.toordinal(), stream])


def _sample_candidates(rng: np.random.Generator, n_requests: int, n_items: int, slots: int) -> np.ndarray:
    """K distinct item indices per request (vectorized; rows with a repeat are redrawn exactly)."""
    picks = rng.integers(0, n_items, size=(n_requests, slots))
    step = 1 << 14  # rows checked per sort: bounds the temporaries (the draws are made before, in one piece)
    has_repeat = np.concatenate([(np.diff(np.sort(picks[lo:lo + step], axis=1), axis=1) == 0).any(axis=1)
                                 for lo in range(0, n_requests, step)]) if n_requests else np.zeros(0, bool)
    for row in np.flatnonzero(has_repeat):
        picks[row] = rng.choice(n_items, size=slots, replace=False)
    return picks


def _displayed_order(rng: np.random.Generator, policy: str, n_requests: int, slots: int) -> np.ndarray:
    """For each request, the production rank (0-based) of the item shown in each displayed slot."""
    order = np.broadcast_to(np.arange(slots), (n_requests, slots)).copy()
    if policy == "shuffle":
        order = np.argsort(rng.random((n_requests, slots)), axis=1)
    elif policy == "adjacent_swap":
        left = rng.integers(0, slots - 1, size=n_requests)
        rows = np.arange(n_requests)
        order[rows, left], order[rows, left + 1] = left + 1, left
    elif policy != "production":
        raise ValueError(f"unknown policy {policy!r}; expected production, shuffle or adjacent_swap")
    return order


def production_ranking_chunks(
    config: SimulationConfig, items: pd.DataFrame, day: dt.date, n_requests: int, stream: int, chunk: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(item_index, score) of `simulate_requests(config, items, day, "production", n_requests, stream)`,
    `chunk` requests at a time as (rows, K) arrays in display order. The same draws in the same order (the
    candidates in one piece, the score noise chunk after chunk; the production policy draws no display
    order), so the chunks concatenated equal its columns; memory holds the candidates and one chunk."""
    rng = _day_rng(config, day, stream)
    candidates = _sample_candidates(rng, n_requests, len(items), config.slots)
    merit = items["merit_score"].to_numpy()
    for lo in range(0, n_requests, chunk):
        part = candidates[lo:lo + chunk]
        scores = merit[part]
        scores += config.score_noise_sd * rng.standard_normal(part.shape)
        by_score = np.argsort(-scores, axis=1, kind="stable")
        rows = np.arange(len(part))[:, None]
        yield part[rows, by_score], scores[rows, by_score]


def simulate_requests(
    config: SimulationConfig,
    items: pd.DataFrame,
    day: dt.date,
    policy: str,
    n_requests: int,
    stream: int,
) -> dict[str, np.ndarray]:
    """Impressions of `n_requests` requests of one policy on one day, as columnar numpy arrays.

    Returns integer codes (request index, item index) rather than strings; `to_landing_frame` names them.
    """
    rng = _day_rng(config, day, stream)
    k = config.slots
    # Intermediates are (n_requests x K) arrays: each is dropped as soon as it is used, so a day's peak
    # memory is a few of them rather than all (the draws and their order are unchanged).
    candidates = _sample_candidates(rng, n_requests, len(items), k)
    scores = items["merit_score"].to_numpy()[candidates]
    scores += config.score_noise_sd * rng.standard_normal((n_requests, k))
    by_score = np.argsort(-scores, axis=1, kind="stable")  # production rank -> candidate column
    shown = _displayed_order(rng, policy, n_requests, k)  # display slot -> production rank
    rows = np.arange(n_requests)[:, None]
    shown_candidate = by_score[rows, shown]
    del by_score
    original_position = (shown + 1).astype(np.int32).ravel()
    del shown
    item_index = candidates[rows, shown_candidate]
    del candidates
    shown_scores = scores[rows, shown_candidate].ravel()
    del scores, shown_candidate
    relevance = items["relevance"].to_numpy()[item_index]
    w = bias_curve(config)
    clicks = (relevance == 1) & (rng.random((n_requests, k)) < w[None, :])
    del relevance
    micros = np.sort(rng.integers(0, 86_400_000_000, size=n_requests))
    return {
        "request_index": np.repeat(np.arange(n_requests), k),
        "ts_micros": np.repeat(micros, k),
        "position": np.tile(np.arange(1, k + 1, dtype=np.int32), n_requests),
        "original_position": original_position,
        "item_index": item_index.ravel(),
        "score": shown_scores,
        "click": clicks.astype(np.int32).ravel(),
    }
