"""GroupedInterpolator (the fast transform kernel) against np.interp plus the documented out-of-range rule."""
from __future__ import annotations

import numpy as np
import pytest

from fair_pipeline.eo.piecewise import GroupedInterpolator


def reference(s, x, y, out_of_range):
    out = np.interp(s, x, y)
    if out_of_range == "shift":
        out = np.where(s < x[0], s - x[0] + y[0], out)
        out = np.where(s > x[-1], s - x[-1] + y[-1], out)
    return out


def _knots(rng, m, clustered):
    x = np.sort(rng.normal(size=m) if not clustered else np.r_[rng.normal(size=m - 50), rng.normal(0.3, 1e-7, 50)])
    x = np.unique(x)
    y = np.sort(rng.normal(size=len(x)) * 2)
    return x, y


@pytest.mark.parametrize("out_of_range", ["shift", "clip"])
def test_matches_np_interp_and_out_of_range_rule(out_of_range):
    rng = np.random.default_rng(0)
    knots = [_knots(rng, 1001, False), _knots(rng, 300, True), (np.array([0.5]), np.array([2.0])), _knots(rng, 2, False)]
    interp = GroupedInterpolator.build(knots, out_of_range)
    n = 200_000
    codes = rng.integers(0, len(knots), n)
    s = rng.normal(0, 2, n)
    # Every knot itself, its neighbours in floating point, and the ends.
    for g, (x, _) in enumerate(knots):
        probe = np.r_[x, np.nextafter(x, -np.inf), np.nextafter(x, np.inf), x[0] - 5, x[-1] + 5]
        s = np.r_[s, probe]
        codes = np.r_[codes, np.full(len(probe), g)]
    got = interp(s, codes)
    for g, (x, y) in enumerate(knots):
        mine = codes == g
        want = reference(s[mine], x, y, out_of_range)
        inside = (s[mine] >= x[0]) & (s[mine] <= x[-1])
        np.testing.assert_array_equal(got[mine][inside], want[inside])  # numpy.interp's formula, bit for bit
        np.testing.assert_allclose(got[mine][~inside], want[~inside], rtol=0, atol=1e-12)
    assert interp.passes <= 4
    assert 0 < interp.heavy.sum() < 0.01 * len(interp.heavy)  # the 1e-7 cluster takes the binary-search path
