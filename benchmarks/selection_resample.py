"""Paired cost differences of candidates whose thresholds are estimated (a selection rate): items' sizes kept, the
items drawn again.

A candidate that selects the top share q of the held-out examples places its threshold from the same rows it is
scored on, so the threshold moves with the draw of items, and under heavy-tailed popularity one popular item near
it moves it far. The delta method's threshold term (`paired.rate_influence`) needs the density at the threshold and
is a linearisation of exactly that jump.

The model is the one of `audit.stats.item_binomial` and `audit.stats.exchangeable`: what an item is (its group, its
labels' mix, every candidate's score) does not depend on how often it is shown. Given the clusters' sizes, a draw is
then C fresh items, each from the observed items' distribution, put into the C size slots. Each resample does
exactly that (item j's attributes, rows and labels' shares, go to a slot of size n_k, drawn uniformly with
replacement), re-chooses every candidate's threshold from the resampled examples and recomputes every cost; the
same resamples serve every candidate (paired). The resampling world's truth is the cost with every item weighing the
same (its attributes at any common size), so the interval is the basic bootstrap one about that centre,
    [D̂ - q_{1-α/2}(D* - D̃), D̂ - q_{α/2}(D* - D̃)],
D̃ the size-free difference, and p the two-sided share of resamples whose error reaches D̂. The selection rate's
quantile, the heavy-tailed sizes and the cost's curvature are all in the resampled differences; nothing is
linearised.

Status: measured, not the pipeline's interval. `benchmarks/selection_rate_coverage.py --resample` prints it beside
what `paired_cost_difference` reports for selection-rate candidates, on fresh items of Pareto(1.3) popularity: at
2,000 and 4,000 items (seeds 0 and 7, 100-193 estimable draws each) it covered 0.89-0.94, missing on both sides,
below the 93-97% band (docs/audit_inference.md). Pure numpy / pandas.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RESAMPLES = 1000
SEED = 0  # fixed: the same rows give the same interval on every run
_CELLS_PER_CHUNK = 4_000_000  # resamples x rows held at once


@dataclass(frozen=True)
class ResampledCosts:
    """Every candidate's cost in every resample (``costs`` (B, K), column order ``names``) and with every item
    weighing the same (``centre`` (K,), the resampling world's truth)."""

    names: list
    costs: np.ndarray
    centre: np.ndarray

    def difference(self, a, b, estimate: float, confidence: float = 0.95) -> tuple[float, float, float, float]:
        """(low, high, p, sd) of cost(a) - cost(b) = ``estimate`` (module doc); sd: the resampled errors' SD."""
        i, j = self.names.index(a), self.names.index(b)
        error = (self.costs[:, i] - self.costs[:, j]) - (self.centre[i] - self.centre[j])
        tail = (1.0 - confidence) / 2.0
        low, high = estimate - np.quantile(error, 1.0 - tail), estimate - np.quantile(error, tail)
        reps = error.size
        p = 2.0 * min(np.count_nonzero(error >= estimate) + 1, np.count_nonzero(error <= estimate) + 1) / (reps + 1)
        return float(low), float(high), float(min(p, 1.0)), float(error.std(ddof=1))


def resampled_costs(metric, rows: pd.DataFrame, codes: np.ndarray, scores: dict, *, selection_rate: float | None,
                    thresholds: dict | None = None, decisions: dict | None = None, clusters=None,
                    reps: int = RESAMPLES, seed: int = SEED) -> ResampledCosts:
    """`ResampledCosts` of the candidates ``scores`` (name -> score per row; threshold: ``thresholds[name]`` if
    given, else the ``selection_rate`` share of the resampled examples) and ``decisions`` (name -> probability of a
    positive decision per row, fixed) on ``rows`` (n_pos, n_neg; ``codes`` the metric's group of each row),
    ``clusters`` one label per row (None: every row its own)."""
    thresholds, decisions = thresholds or {}, decisions or {}
    cluster = (np.arange(len(rows)) if clusters is None
               else pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), use_na_sentinel=False)[0])
    names = list(scores) + [name for name in decisions if name not in scores]
    columns = [np.asarray(scores[name] if name in scores else decisions[name], dtype=np.float64) for name in names]
    # rows alike in item, group and every candidate's score or decision are one row with their counts summed
    _, first, inverse = np.unique(np.column_stack([cluster, codes] + columns), axis=0, return_index=True,
                                  return_inverse=True)
    inverse = inverse.ravel()
    p = np.bincount(inverse, weights=rows["n_pos"].to_numpy(dtype=np.float64), minlength=first.size)
    n = np.bincount(inverse, weights=rows["n_neg"].to_numpy(dtype=np.float64), minlength=first.size)
    cluster, codes, columns = cluster[first], np.asarray(codes)[first], [c[first] for c in columns]
    w = p + n
    if not (w > 0).any():
        raise ValueError("no labelled examples to resample")
    size = np.bincount(cluster, weights=w)
    held = size > 0
    sizes = size[held]
    frac = np.divide(w, size[cluster], out=np.zeros_like(w), where=size[cluster] > 0)  # row's share of its item
    pos_share = np.divide(p, w, out=np.zeros_like(w), where=w > 0)
    onehot = np.zeros((w.size, metric.n_groups))
    onehot[np.arange(w.size), codes] = 1.0
    fixed = {name: c for name, c in zip(names, columns) if name not in scores}
    ranked = {name: (c, np.argsort(-c, kind="stable")) for name, c in zip(names, columns) if name in scores}
    items = np.flatnonzero(held)

    def costs(weight: np.ndarray) -> np.ndarray:  # weight (b, clusters): examples given to each item's attributes
        rw = weight[:, cluster] * frac
        pw, nw = rw * pos_share, rw * (1.0 - pos_share)
        pos, neg = pw @ onehot, nw @ onehot
        out = np.empty((weight.shape[0], len(names)))
        for k, name in enumerate(names):
            if name in fixed:
                sel = np.broadcast_to(fixed[name], rw.shape)
            else:
                s, order = ranked[name]
                t = thresholds.get(name)
                if t is None:
                    cum = np.cumsum(rw[:, order], axis=1)
                    at = np.argmax(cum >= selection_rate * cum[:, -1:] * (1.0 - 1e-12), axis=1)
                    t = s[order][at][:, None]
                sel = (s[None, :] >= t).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                rates = np.stack([(pw * sel) @ onehot / pos, (nw * (1.0 - sel)) @ onehot / neg], axis=-1)
            out[:, k] = metric(rates)
        return out

    centre = costs(held[None, :].astype(np.float64))[0]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(reps, _CELLS_PER_CHUNK // w.size))
    found = []
    for start in range(0, reps, chunk):
        b = min(chunk, reps - start)
        drawn = items[rng.integers(0, items.size, (b, items.size))]  # the item put into each size slot
        flat = (np.arange(b)[:, None] * size.size + drawn).ravel()
        weight = np.bincount(flat, weights=np.tile(sizes, b), minlength=b * size.size).reshape(b, size.size)
        found.append(costs(weight))
    return ResampledCosts(names, np.vstack(found), centre)
