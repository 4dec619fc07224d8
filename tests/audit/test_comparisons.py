"""Comparisons asked for: each group with a reference gives exactly the all-pairs numbers for those pairs, and the
sweep and the output grow with the comparisons (groups - 1), not with groups^2."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError, compare_groups, xauc
from fair_pipeline.audit.files import audit_file
from fair_pipeline.audit.stats import sweep
from fair_pipeline.audit.stats.comparisons import compared_pairs
from fair_pipeline.audit.stats.grid_audit import GridAudit
from fair_pipeline.commands import main

G = 30  # enough groups that the reference sweep keeps its sums per column (sweep.DENSE_SHARE)


def _data(groups: int, n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    y = rng.random(n) < 0.3
    s = np.round(rng.normal(size=n) + y * (1 + 0.05 * g), 2)  # ties, and groups that really differ
    labels = np.array([f"g'{i:02d} +" for i in range(groups)], dtype=object)[g]
    return s, y, labels


@pytest.fixture(scope="module")
def data():
    return _data(G, 24_000)


def _oriented(all_pairs: pd.DataFrame, ref: pd.DataFrame, keys: list, signed: list):
    """The all-pairs rows of the reference table's pairs, turned to the reference table's orientation (a - b)."""
    same = all_pairs.merge(ref[["group_a", "group_b"] + keys], on=["group_a", "group_b"] + keys)
    swapped = all_pairs.rename(columns={"group_a": "group_b", "group_b": "group_a"}).merge(
        ref[["group_a", "group_b"] + keys], on=["group_a", "group_b"] + keys)
    swapped[signed] = -swapped[signed]
    return pd.concat([same, swapped]).sort_values(["group_a", "group_b"] + keys).reset_index(drop=True)


def _equal(a: pd.DataFrame, b: pd.DataFrame, columns: list, tol: float = 1e-12):
    for column in columns:
        x, y = a[column].to_numpy(float), b[column].to_numpy(float)
        assert (np.isnan(x) == np.isnan(y)).all(), column
        assert np.nanmax(np.abs(x - y)) <= tol, column


def test_each_group_with_a_reference_equals_those_pairs_of_the_all_pairs_audit(data):
    s, y, g = data
    everything, with_ref = compare_groups(s, y, g), compare_groups(s, y, g, comparisons="reference", reference="g'07 +")
    assert len(with_ref.pairs) == (G - 1) * with_ref.groups["cutoff"].nunique()
    assert set(with_ref.pairs["group_b"]) == {"g'07 +"}
    pd.testing.assert_frame_equal(everything.groups, with_ref.groups)
    ref = with_ref.pairs.sort_values(["group_a", "group_b", "cutoff"]).reset_index(drop=True)
    expected = _oriented(everything.pairs.drop(columns="p_holm"), ref, ["cutoff"],
                         ["diff", "diff_normalized", "ci_low", "ci_high", "z"])
    _equal(expected, ref, ["diff", "se", "p_value"])
    x_all, x_ref = xauc(s, y, g), xauc(s, y, g, comparisons="reference", reference="g'07 +")
    assert len(x_ref.pairs) == 2 * (G - 1) and len(x_ref.deltas) == G - 1 and len(x_ref.balanced_deltas) == 2 * (G - 1)
    both = x_all.pairs.merge(x_ref.pairs, on=["group_a", "group_b"], suffixes=("", "_ref"))
    assert len(both) == 2 * (G - 1)
    _equal(both, both.rename(columns=lambda c: c.removesuffix("_ref") if c.endswith("_ref") else c + "_x"),
           ["xauc", "variance"])
    pd.testing.assert_frame_equal(x_all.balanced, x_ref.balanced)
    deltas = x_ref.deltas.sort_values(["group_a", "group_b"]).reset_index(drop=True)
    _equal(_oriented(x_all.deltas, deltas, [], ["delta"]), deltas, ["delta", "se"])
    bal = x_ref.balanced_deltas.sort_values(["group_a", "group_b", "kind"]).reset_index(drop=True)
    _equal(_oriented(x_all.balanced_deltas, bal, ["kind"], ["delta"]), bal, ["delta", "se"], tol=1e-14)


def test_the_reference_sweep_keeps_its_sums_per_column_and_all_pairs_do_not(data):
    """The per-column sums (what makes thousands of groups linear) are what the test above checked."""
    s, y, g = data
    codes = pd.factorize(g, sort=True)[0]
    n_pos, n_neg = np.bincount(codes, y, G), np.bincount(codes, ~y, G)
    reference = GridAudit(n_pos, n_neg, np.array([0.1, 1.0]), compared=compared_pairs(range(G), n_pos + n_neg,
                                                                                       "reference")[0])
    everything = GridAudit(n_pos, n_neg, np.array([0.1, 1.0]))
    assert not reference.sweep.dense and not reference.dense_cross
    assert everything.sweep.dense and everything.dense_cross
    assert len(reference.pairs) == 5 * G - 1  # groups, overall, 2 x (G - 1) xAUC, 2 x G balanced
    assert reference.sweep.run[0].shape == (5 * G - 1,)


def test_sweep_columns_and_json_grow_with_the_comparisons_asked_for(tmp_path):
    groups = 40
    s, y, g = _data(groups, 40 * groups, seed=groups)
    path = tmp_path / "scored.parquet"
    pd.DataFrame({"score": s, "label": y.astype(int), "grp": g}).to_parquet(path)
    sizes = {}
    for mode in ("reference", "all"):
        result = audit_file(path, "score", "label", "grp", max_groups=groups, comparisons=mode)
        out = result.to_dict()
        pairs = groups - 1 if mode == "reference" else groups * (groups - 1) // 2
        assert out["comparisons"]["mode"] == mode and out["comparisons"]["pairs"] == pairs
        assert len(out["pairs"]) == pairs * len(out["cutoffs"])
        assert len(out["xauc"]["pairs"]) == 2 * pairs and len(out["xauc"]["deltas"]) == pairs
        assert len(out["xauc"]["balanced_deltas"]) == 2 * pairs
        sizes[mode] = len(json.dumps(out))
    # the per-group tables are the same in both; the pair tables hold groups - 1 vs groups^2 / 2 pairs
    assert sizes["all"] > (groups / 4) * sizes["reference"]
    per_comparison = sizes["reference"] / groups
    assert 2_000 < per_comparison < 40_000  # bytes per group and its one comparison: no groups^2 term hides in it


def test_json_of_a_reference_audit_grows_linearly_in_groups(tmp_path):
    sizes = {}
    for groups in (40, 160):
        s, y, g = _data(groups, 40 * groups, seed=groups)
        path = tmp_path / f"scored_{groups}.parquet"
        pd.DataFrame({"score": s, "label": y.astype(int), "grp": g}).to_parquet(path)
        sizes[groups] = len(json.dumps(audit_file(path, "score", "label", "grp", max_groups=groups).to_dict()))
    assert sizes[160] / sizes[40] < 4 * 1.2  # 4x the groups; all pairs would be ~16x


def test_auto_compares_all_pairs_of_a_few_groups_and_the_cli_takes_a_reference(tmp_path, capsys):
    s, y, g = _data(5, 3000)
    path = tmp_path / "few.csv"
    pd.DataFrame({"score": s, "label": y.astype(int), "grp": g}).to_csv(path, index=False)
    assert audit_file(path, "score", "label", "grp").comparisons == {"mode": "all", "reference": None, "pairs": 10}
    assert main(["audit", str(path), "--score", "score", "--label", "label", "--group", "grp", "--json",
                 "--reference", "g'03 +"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comparisons"] == {"mode": "reference", "reference": "g'03 +", "pairs": 4}
    assert {p["group_b"] for p in out["pairs"]} == {"g'03 +"}
    assert main(["audit", str(path), "--score", "score", "--label", "label", "--group", "grp", "--compare", "reference"]) == 0
    text = capsys.readouterr().out
    largest = pd.Series(g).value_counts().sort_index(kind="stable").idxmax()
    assert f"Comparisons: each group against {largest!r} (4 pairs; --compare all for every pair" in text
    assert main(["audit", str(path), "--score", "score", "--label", "label", "--group", "grp",
                 "--reference", "nobody"]) == 2
    assert "reference group 'nobody' is not among the groups" in capsys.readouterr().err
    with pytest.raises(AuditInputError, match="comparisons"):
        audit_file(path, "score", "label", "grp", comparisons="some")


def test_the_largest_group_is_the_default_reference():
    pairs, reference = compared_pairs(["a", "b", "c"], [10, 30, 30], "reference")
    assert reference == "b" and pairs == [(0, 1), (2, 1)]
    assert compared_pairs(["a", "b", "c"], [1, 1, 1], "all") == ([(0, 1), (0, 2), (1, 2)], None)


def test_paired_dots_in_steps_equals_the_full_sum(monkeypatch):
    rng = np.random.default_rng(3)
    a, b = rng.random((7, 5)), rng.random((6, 5))
    rows_a, rows_b = rng.integers(0, 7, 40), rng.integers(0, 6, 40)
    monkeypatch.setattr(sweep, "COLUMN_STEP", 11)  # steps of two columns
    assert np.allclose(sweep.paired_dots(a, rows_a, b, rows_b), (a[rows_a] * b[rows_b]).sum(axis=1))


def test_a_clustered_reference_audit_equals_those_pairs_of_the_clustered_all_pairs_audit(tmp_path):
    """The cluster-robust covariances (and the balanced-xAUC ones taken from them per compared pair) follow the
    compared columns."""
    groups = 12
    s, y, g = _data(groups, 6000, seed=5)
    item = np.random.default_rng(5).integers(0, 400, s.size)
    path = tmp_path / "clustered.parquet"
    pd.DataFrame({"score": s, "label": y.astype(int), "grp": g, "item": item}).to_parquet(path)
    ref = audit_file(path, "score", "label", "grp", clusters="item", comparisons="reference", reference="g'04 +",
                     min_clusters=2).report
    everything = audit_file(path, "score", "label", "grp", clusters="item", comparisons="all", min_clusters=2).report
    assert ref.pairs["estimable"].any() and np.isfinite(ref.pairs["se"]).any()
    pairs = ref.pairs.sort_values(["group_a", "group_b", "cutoff"]).reset_index(drop=True)
    _equal(_oriented(everything.pairs.drop(columns="p_holm"), pairs, ["cutoff"], ["diff"]), pairs, ["diff", "se"])
    bal = ref.xauc.balanced_deltas.sort_values(["group_a", "group_b", "kind"]).reset_index(drop=True)
    assert len(bal) == 2 * (groups - 1)
    _equal(_oriented(everything.xauc.balanced_deltas, bal, ["kind"], ["delta"]), bal, ["delta", "se"], tol=1e-12)
