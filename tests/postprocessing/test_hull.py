"""ROC points and hull against the slides' 20-row worked example, and a brute-force hull check."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from fair_pipeline.postprocessing import PostProcessingInputError, roc_convex_hull, roc_points, upper_hull_indices

# The slides' table: 20 individuals sorted by score, classes, and the printed (TFP, TVP) after each row.
SLIDE_SCORES = np.array([1, .95, .9, .85, .8, .75, .7, .65, .6, .55, .5, .45, .4, .35, .3, .25, .2, .15, .1, .05])
SLIDE_LABELS = np.array([1, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])
SLIDE_FPR = [0, 0, 0, 0, .071, .071, .143, .214, .214, .286, .357, .429, .429, .5, .571, .643, .714, .786, .857, .929, 1]
SLIDE_TPR = [0, .167, .333, .5, .5, .667, .667, .667, .833, .833, .833, .833, 1, 1, 1, 1, 1, 1, 1, 1, 1]


def test_roc_points_match_the_slides_table_and_auc():
    curve = roc_points(SLIDE_SCORES, SLIDE_LABELS)
    assert (curve.n_pos, curve.n_neg) == (6, 14)
    np.testing.assert_allclose(curve.fpr, SLIDE_FPR, atol=5e-4)
    np.testing.assert_allclose(curve.tpr, SLIDE_TPR, atol=5e-4)
    trapezoids = np.diff(curve.fpr) * (curve.tpr[1:] + curve.tpr[:-1]) / 2  # the slides' s_i
    assert trapezoids.sum() == pytest.approx(0.881, abs=5e-4)  # the slides' trapezoid AUC
    assert curve.thresholds[0] == np.inf and curve.thresholds[-1] == -np.inf
    np.testing.assert_allclose(curve.thresholds[1:-1], SLIDE_SCORES[:-1])


def test_hull_of_the_slides_example():
    # Vertices worked out by hand: from (0, .5) the steepest chord goes to (1/14, 4/6), then (3/14, 5/6),
    # then (6/14, 1), then (1, 1); the other points lie strictly below.
    hull = roc_convex_hull(SLIDE_SCORES, SLIDE_LABELS)
    np.testing.assert_allclose(hull["fpr"], [0, 0, 1 / 14, 3 / 14, 6 / 14, 1])
    np.testing.assert_allclose(hull["tpr"], [0, 3 / 6, 4 / 6, 5 / 6, 1, 1])
    np.testing.assert_allclose(hull["threshold"].to_numpy()[1:-1], [.9, .8, .65, .45])


@pytest.mark.parametrize("seed", range(20))
def test_upper_hull_against_scipy_on_random_rocs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    y = rng.random(n) < 0.4
    y[:2] = [True, False]
    s = np.round(rng.normal(y * rng.uniform(-1, 2), 1.0), 1)  # ties on purpose
    curve = roc_points(s, y)
    k = upper_hull_indices(curve.fpr, curve.tpr)
    pts = np.c_[curve.fpr, curve.tpr]
    # every point lies on or below the hull polyline; vertices are points of the ROC curve
    on_hull = np.interp(pts[:, 0], curve.fpr[k], curve.tpr[k])
    assert np.all(pts[:, 1] <= on_hull + 1e-12)
    hx, hy = curve.fpr[k], curve.tpr[k]
    turns = (hx[1:-1] - hx[:-2]) * (hy[2:] - hy[:-2]) - (hy[1:-1] - hy[:-2]) * (hx[2:] - hx[:-2])
    assert np.all(turns < 0), "consecutive vertices make strict right turns (a concave chain)"
    # scipy's hull of the points plus (1, 0) has the same upper vertices
    extra = np.r_[pts, [[1.0, 0.0]]]
    qh = ConvexHull(extra)
    scipy_vertices = {tuple(np.round(extra[v], 12)) for v in qh.vertices if not (extra[v] == [1.0, 0.0]).all()}
    mine = {tuple(np.round(p, 12)) for p in pts[k]}
    # scipy also lists lower-hull vertices on the path from (0,0) down to (1,0): only those below the diagonal
    assert mine <= scipy_vertices | {(0.0, 0.0), (1.0, 1.0)}
    assert {v for v in scipy_vertices if v[1] > v[0] + 1e-12} <= mine


def test_one_class_is_refused():
    with pytest.raises(PostProcessingInputError, match="both classes"):
        roc_points([0.1, 0.2], [1, 1])
