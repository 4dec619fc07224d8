"""Gaussian proxy of the conditional mutual information I(s; C | Y) (Nandy et al., section 4, appendix C).

Approximating s | Y=y and s | (C=j, Y=y) by normal distributions turns the entropy difference into
log-variances:

    2 Î = sum_y (W_y / W) * ( log var_y - sum_j (W_jy / W_y) log var_jy )

with W the (sample-)weight totals and var the weighted population variances (1/W, as in the paper).
By concavity of log, Î >= 0 and Î = 0 iff every group has the label's mean and variance.

Gradient with respect to the scores (derived from the above, checked by finite differences in tests):

    d(2 Î) / d s_i = (2 w_i / W) * ( (s_i - mu_y) / var_y - (s_i - mu_jy) / var_jy ),   y = y_i, j = c_i

so one penalty evaluation costs a few ``bincount`` passes on top of the scores.
Cells are indexed ``cell = 2 * group_code + label``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_LABELS = 2


class MIPenaltyError(ValueError):
    """Input that makes the conditional-mutual-information proxy undefined."""


def encode_groups(groups, *, name: str = "sensitive_features"):
    """Map group labels to integer codes; reject missing values (NaN / None).

    Returns ``(codes, labels)`` with ``labels[codes] == groups``.
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        if groups.ndim == 2 and groups.shape[1] == 1:
            groups = groups[:, 0]
        else:
            raise MIPenaltyError(f"{name} must be one column, got shape {groups.shape}")
    missing = _is_missing(groups)
    if missing.any():
        first = np.flatnonzero(missing)[:5].tolist()
        raise MIPenaltyError(
            f"{name} has {int(missing.sum())} missing value(s) (NaN/None), first at rows {first}; "
            "drop or impute them before fitting"
        )
    if groups.dtype.kind == "O":
        groups = groups.astype(str)
    labels, codes = np.unique(groups, return_inverse=True)
    return codes.astype(np.intp), labels


def _is_missing(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind == "O":
        # Test the few distinct labels, not every row (a per-row Python loop cost 40 ms per Adult fit).
        try:
            any_missing = any(_is_missing_scalar(v) for v in set(values.tolist()))
        except TypeError:  # unhashable labels: test row by row
            any_missing = True
        if not any_missing:
            return np.zeros(values.shape, dtype=bool)
        return np.array([_is_missing_scalar(v) for v in values], dtype=bool)
    return np.zeros(values.shape, dtype=bool)


def _is_missing_scalar(value) -> bool:
    # None, float NaN, NaT and pandas.NA (whose comparisons are NA, not bool) without importing pandas.
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, float) and value != value


@dataclass
class CellMoments:
    """Weighted count, mean and sum of squared deviations per (group, label) cell.

    Mergeable (Chan et al.), so a stream of batches can accumulate population statistics.
    """

    weight: np.ndarray  # W_jy, shape (n_cells,)
    mean: np.ndarray  # mu_jy
    m2: np.ndarray  # sum_i w_i (s_i - mu_jy)^2
    count: np.ndarray  # rows with positive weight (for the "fewer than two members" check)

    @classmethod
    def empty(cls, n_cells: int = 0) -> "CellMoments":
        z = np.zeros(n_cells)
        return cls(z.copy(), z.copy(), z.copy(), np.zeros(n_cells, dtype=np.int64))

    @classmethod
    def from_scores(cls, scores, cells, weights, n_cells: int, w_cell=None, count=None):
        """Moments of ``scores`` per cell; pass precomputed ``w_cell`` / ``count`` to skip them."""
        if w_cell is None:
            w_cell = np.bincount(cells, weights=weights, minlength=n_cells)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(cells, weights=weights * scores, minlength=n_cells) / w_cell
        mean = np.where(w_cell > 0, mean, 0.0)
        m2 = np.bincount(cells, weights=weights * (scores - mean[cells]) ** 2, minlength=n_cells)
        if count is None:
            count = np.bincount(cells[weights > 0], minlength=n_cells)
        return cls(w_cell, mean, m2, count)

    def resized(self, n_cells: int) -> "CellMoments":
        if n_cells <= self.weight.size:
            return self
        pad = n_cells - self.weight.size
        return CellMoments(
            np.pad(self.weight, (0, pad)),
            np.pad(self.mean, (0, pad)),
            np.pad(self.m2, (0, pad)),
            np.pad(self.count, (0, pad)),
        )

    def merge(self, other: "CellMoments") -> "CellMoments":
        n = max(self.weight.size, other.weight.size)
        a, b = self.resized(n), other.resized(n)
        w = a.weight + b.weight
        delta = b.mean - a.mean
        with np.errstate(invalid="ignore", divide="ignore"):
            frac_b = np.where(w > 0, b.weight / w, 0.0)
        mean = a.mean + delta * frac_b
        m2 = a.m2 + b.m2 + delta**2 * a.weight * frac_b
        return CellMoments(w, mean, m2, a.count + b.count)


@dataclass(frozen=True)
class ProxyStats:
    """Per-cell and per-label means / variances that define Î and its score gradient."""

    cell_weight: np.ndarray
    cell_mean: np.ndarray
    cell_var: np.ndarray
    label_weight: np.ndarray  # (2,)
    label_mean: np.ndarray
    label_var: np.ndarray
    total_weight: float

    @property
    def value(self) -> float:
        """Î (not 2Î): the penalty value reported to users."""
        present = self.cell_weight > 0
        cell_labels = np.arange(self.cell_weight.size) % N_LABELS
        cell_term = np.zeros(N_LABELS)
        np.add.at(
            cell_term,
            cell_labels[present],
            self.cell_weight[present] * np.log(self.cell_var[present]),
        )
        two_i = (self.label_weight * np.log(self.label_var) - cell_term).sum() / self.total_weight
        return 0.5 * float(two_i)


def proxy_stats(moments: CellMoments, group_labels=None, *, check_counts: bool = True) -> ProxyStats:
    """Validate cell moments and turn them into means / variances.

    Raises MIPenaltyError for a label with no rows, a (group, label) cell with fewer than two
    members, or a cell whose scores are constant (log-variance undefined).
    """
    n_cells = moments.weight.size
    n_groups = n_cells // N_LABELS
    names = group_labels if group_labels is not None else np.arange(n_groups)
    for cell in range(n_cells if check_counts else 0):
        group, label = _plain(names[cell // N_LABELS]), cell % N_LABELS
        if moments.count[cell] < 2:
            raise MIPenaltyError(
                f"group {group!r} has {int(moments.count[cell])} member(s) with label {label}; "
                "the mutual-information penalty needs at least 2 per (group, label) cell "
                "(merge small groups or drop them)"
            )
    label_weight, label_mean, label_m2 = pool_labels(moments)
    cell_var = moments.m2 / moments.weight
    label_var = label_m2 / label_weight
    _check_not_constant(cell_var, moments.mean, names, per_cell=True)
    _check_not_constant(label_var, label_mean, None, per_cell=False)
    return ProxyStats(
        cell_weight=moments.weight,
        cell_mean=moments.mean,
        cell_var=cell_var,
        label_weight=label_weight,
        label_mean=label_mean,
        label_var=label_var,
        total_weight=float(label_weight.sum()),
    )


def stats_from_sums(weight: np.ndarray, s1: np.ndarray, s2: np.ndarray, group_labels=None) -> ProxyStats:
    """ProxyStats from per-cell raw sums (sum w, sum w s, sum w s^2): the cheap per-batch path.

    Raw sums lose precision when a cell's variance is tiny next to its squared mean; below a safe
    margin this falls back to the validating path, which names a constant cell.
    """
    mean = s1 / weight
    var = s2 / weight - mean**2
    pooled = weight.reshape(-1, N_LABELS).sum(0)
    label_mean = s1.reshape(-1, N_LABELS).sum(0) / pooled
    label_var = s2.reshape(-1, N_LABELS).sum(0) / pooled - label_mean**2
    if not (np.all(var > 1e-8 * mean**2) and np.all(weight > 0)):
        count = np.full(weight.size, 2)
        return proxy_stats(CellMoments(weight, mean, np.maximum(var, 0.0) * weight, count), group_labels)
    return ProxyStats(weight, mean, var, pooled, label_mean, label_var, float(pooled.sum()))


def pool_labels(moments: CellMoments):
    """Pool (group, label) cells into per-label weight, mean and m2 (law of total variance)."""
    labels = np.arange(moments.weight.size) % N_LABELS
    weight = np.bincount(labels, weights=moments.weight, minlength=N_LABELS)
    mean = np.bincount(labels, weights=moments.weight * moments.mean, minlength=N_LABELS) / weight
    between = moments.weight * (moments.mean - mean[labels]) ** 2
    m2 = np.bincount(labels, weights=moments.m2 + between, minlength=N_LABELS)
    return weight, mean, m2


def _check_not_constant(var, mean, names, *, per_cell: bool) -> None:
    # Spread below float precision of the values themselves counts as constant.
    floor = np.finfo(float).eps * np.maximum(mean**2, np.finfo(float).tiny)
    bad = np.flatnonzero(~(var > floor))
    if bad.size:
        k = int(bad[0])
        where = (
            f"group {_plain(names[k // N_LABELS])!r}, label {k % N_LABELS}" if per_cell else f"label {k}"
        )
        raise MIPenaltyError(
            f"scores are constant within {where} (variance {var[k]:.3g}); the Gaussian "
            "mutual-information proxy is undefined there. Start from a fitted (unpenalized) model, "
            "never from all-zero coefficients"
        )


def cells_of(group_codes, labels01) -> np.ndarray:
    return N_LABELS * np.asarray(group_codes, dtype=np.intp) + np.asarray(labels01, dtype=np.intp)


def stats_from_scores(scores, labels01, group_codes, weights=None, *, group_labels=None) -> ProxyStats:
    scores = np.asarray(scores, dtype=float)
    weights = np.ones_like(scores) if weights is None else np.asarray(weights, dtype=float)
    group_codes = np.asarray(group_codes, dtype=np.intp)
    n_groups = int(group_codes.max()) + 1 if group_codes.size else 0
    cells = cells_of(group_codes, labels01)
    moments = CellMoments.from_scores(scores, cells, weights, N_LABELS * n_groups)
    return proxy_stats(moments, group_labels)


def mi_proxy(scores, labels01, groups, sample_weight=None) -> float:
    """Î(s; C | Y), the Gaussian proxy of the conditional mutual information (natural log units)."""
    codes, names = encode_groups(groups)
    labels01 = _as_labels01(labels01)
    return stats_from_scores(scores, labels01, codes, sample_weight, group_labels=names).value


def score_gradient_coefficients(stats: ProxyStats):
    """Per-cell (a, b) with d(2Î)/ds_i = (2 w_i / W) (a[c_i] s_i + b[c_i]): two gathers per row."""
    labels = np.arange(stats.cell_weight.size) % N_LABELS
    a = 1.0 / stats.label_var[labels] - 1.0 / stats.cell_var
    b = stats.cell_mean / stats.cell_var - stats.label_mean[labels] / stats.label_var[labels]
    return a, b


def score_gradient(stats: ProxyStats, scores, cells, weights, total_weight: float | None = None):
    """d(2Î)/ds_i for the rows given, at fixed population statistics ``stats``.

    ``total_weight`` rescales for mini-batches (batch weight instead of the population weight).
    """
    W = stats.total_weight if total_weight is None else total_weight
    a, b = score_gradient_coefficients(stats)
    return (2.0 * weights / W) * (a[cells] * scores + b[cells])


def _as_labels01(y) -> np.ndarray:
    y = np.asarray(y)
    values = np.unique(y)
    if not np.isin(values, [0, 1]).all():
        raise MIPenaltyError(f"labels must be 0/1, got values {values[:5].tolist()}")
    return y.astype(np.intp)


class GroupCoder:
    """Stable integer codes for group labels seen across a stream of batches (order of appearance)."""

    def __init__(self):
        self._codes: dict = {}

    @property
    def labels(self) -> np.ndarray:
        return np.array(list(self._codes), dtype=object)

    def encode(self, groups, *, name: str = "sensitive_features") -> np.ndarray:
        codes, labels = encode_groups(groups, name=name)
        mapped = np.array([self._codes.setdefault(_plain(v), len(self._codes)) for v in labels])
        return mapped[codes].astype(np.intp) if labels.size else codes


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value
