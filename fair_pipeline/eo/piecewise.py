"""Fast evaluation of one monotone piecewise-linear map per group, for all groups in one vectorized pass.

np.interp binary-searches 1,001 knots for every score (~10 unpredictable branches each). Here each group's
knot range is cut into M equal cells; a cell table gives, for every cell, a segment at or before the first
one the cell can touch, and a few vectorized "step forward while the next knot is <= s" passes finish the
search. The value is then y_i + slope_i (s - x_i), numpy.interp's own formula. Below the first knot and at
or above the last one the out-of-range rule applies ("shift": slope 1; "clip": slope 0), encoded as an
extra segment before the first knot and as the slope of the last knot, so no masks are needed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

_MIN_CELLS_PER_KNOT = 8
_MAX_CELLS = 1 << 16
_CHUNK = 1 << 15
_MAX_PASSES = 4  # cells needing more (knots packed tighter than a cell) fall back to a binary search


@dataclasses.dataclass(frozen=True)
class GroupedInterpolator:
    xs: np.ndarray  # concatenated per group: [x0 - 1, x0, ..., x_last, +inf]
    ys: np.ndarray
    slopes: np.ndarray  # slope of the segment starting at each knot
    lo: np.ndarray  # per group: first knot
    inv_width: np.ndarray  # per group: cells per score unit
    start: np.ndarray  # (n_groups * (n_cells + 2),) global segment index to start from
    heavy: np.ndarray  # (n_groups * (n_cells + 2),) bool: cell needs more than `passes` steps
    group_bounds: np.ndarray  # (n_groups + 1,) offsets of each group's knots in xs
    n_cells: int
    passes: int

    @classmethod
    def build(cls, knots: list[tuple[np.ndarray, np.ndarray]], out_of_range: str) -> "GroupedInterpolator":
        edge_slope = 1.0 if out_of_range == "shift" else 0.0
        n_cells = _MIN_CELLS_PER_KNOT * max(len(x) for x, _ in knots)
        while True:
            parts = [_group_tables(x, y, edge_slope, n_cells) for x, y in knots]
            steps = np.concatenate([p[-1] for p in parts])
            if steps.max() <= _MAX_PASSES or 2 * n_cells > _MAX_CELLS:
                break
            n_cells *= 2
        xs, ys, slopes, starts, bounds = [], [], [], [], [0]
        for gx, gy, gslope, gstart, _lo, _inv, _steps in parts:
            xs.append(gx)
            ys.append(gy)
            slopes.append(gslope)
            starts.append(gstart + bounds[-1])
            bounds.append(bounds[-1] + len(gx))
        passes = int(min(max(steps.max(), 1), _MAX_PASSES))
        return cls(
            xs=np.concatenate(xs),
            ys=np.concatenate(ys),
            slopes=np.concatenate(slopes),
            lo=np.array([p[4] for p in parts]),
            inv_width=np.array([p[5] for p in parts]),
            start=np.concatenate(starts),
            heavy=steps > passes,
            group_bounds=np.array(bounds, dtype=np.intp),
            n_cells=n_cells,
            passes=passes,
        )

    def __call__(
        self, s: np.ndarray, codes: np.ndarray, group_of_code: np.ndarray | None = None, alpha: float = 1.0
    ) -> np.ndarray:
        """(1 - alpha) s + alpha T_g(s) for scores s whose group is g = group_of_code[codes] (identity map
        where g = -1; without group_of_code the codes are the group indices)."""
        out = np.empty(len(s))
        # Chunks keep every temporary in cache (large fresh temporaries cost more in page faults than in math).
        for begin in range(0, len(s), _CHUNK):
            end = begin + _CHUNK
            part = s[begin:end]
            groups = codes[begin:end] if group_of_code is None else group_of_code[codes[begin:end]]
            identity = groups < 0
            has_identity = identity.any()
            if has_identity:
                groups = np.where(identity, 0, groups)
            mapped = self._evaluate(part, groups.astype(np.intp, copy=False))
            if alpha != 1.0:
                mapped *= alpha
                mapped += (1.0 - alpha) * part
            if has_identity:
                mapped[identity] = part[identity]
            out[begin:end] = mapped
        return out

    def _evaluate(self, s: np.ndarray, codes: np.ndarray) -> np.ndarray:
        t = s - self.lo[codes]  # < 0 exactly when s < x0
        t *= self.inv_width[codes]
        np.clip(t, -1.0, float(self.n_cells), out=t)
        t += 1.0
        cell = t.astype(np.intp)  # 0: below x0; 1..n_cells: inside; n_cells + 1: at the top
        cell += codes * (self.n_cells + 2)
        idx = self.start[cell]
        for _ in range(self.passes):
            idx += s >= self.xs[idx + 1]
        heavy = self.heavy[cell]
        if heavy.any():
            idx[heavy] = self._binary_search(s[heavy], codes[heavy])
        result = s - self.xs[idx]
        result *= self.slopes[idx]
        result += self.ys[idx]
        return result

    def _binary_search(self, s: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Segment index by np.searchsorted, for the few scores in cells with tightly packed knots."""
        idx = np.empty(len(s), dtype=np.intp)
        for g in np.unique(codes):
            mine = codes == g
            lo, hi = self.group_bounds[g], self.group_bounds[g + 1]
            # xs[lo] is the below-range knot x0 - 1 and xs[hi - 1] the +inf sentinel: search the finite ones.
            idx[mine] = lo + np.maximum(np.searchsorted(self.xs[lo : hi - 1], s[mine], side="right") - 1, 0)
        return idx


def _group_tables(x: np.ndarray, y: np.ndarray, edge_slope: float, n_cells: int):
    """One group's knots with the out-of-range segments, its cell start table and the steps each cell needs."""
    x0, x_last = float(x[0]), float(x[-1])
    xs = np.r_[x0 - 1.0, x, np.inf]
    ys = np.r_[y[0] - edge_slope, y, y[-1]]
    slopes = np.empty(len(xs))
    slopes[1:-2] = np.diff(y) / np.diff(x)
    slopes[0] = edge_slope
    slopes[-2] = edge_slope  # at or above the last knot
    slopes[-1] = 0.0
    width = (x_last - x0) / n_cells if x_last > x0 else 1.0  # one knot: cells only separate s < x0
    inv_width = 1.0 / width
    # Cell c >= 1 holds s in [x0 + (c-1) w, x0 + c w); start one cell early and count knots up to one cell
    # late, so a cell index off by one through rounding still finds the right segment.
    c = np.arange(n_cells + 2)
    left = x0 + (c - 2) * width
    right = x0 + (c + 1) * width
    finite = xs[:-1]  # never step onto the +inf sentinel
    start = np.maximum(np.searchsorted(finite, left, side="right") - 1, 0)
    start[0] = 0  # below x0: the out-of-range segment
    end = np.searchsorted(finite, right, side="right") - 1
    end[0] = 0  # s < x0 exactly: already on its segment
    end[-1] = len(finite) - 1  # the top cell reaches the last knot
    return xs, ys, slopes, start.astype(np.intp), x0, inv_width, end - start
