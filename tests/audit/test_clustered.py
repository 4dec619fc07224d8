"""Cluster-robust variances and the tie convention, against brute force and scikit-learn."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fair_pipeline.audit import AuditInputError, audit_aggregates, compare_groups, truncated_auc, xauc
from fair_pipeline.audit.stats.blocks import build_grid
from fair_pipeline.audit.stats.clustered import BlockTable, row_influence
from tests.audit import bruteforce as bf

CUTS = [0.05, 0.1, 0.3, 0.55, 1.0]


def _weighted_pauc(s, y, w, alpha):
    """Naive weighted linear-ROC partial AUC, for finite-difference influence functions."""
    order = np.argsort(-s, kind="stable")
    s, y, w = s[order], y[order], w[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]
    fpr = np.r_[0, np.cumsum(w * (1 - y))[last] / np.sum(w * (1 - y))]
    tpr = np.r_[0, np.cumsum(w * y)[last] / np.sum(w * y)]
    area = 0.0
    for k in range(1, fpr.size):
        x0, x1, y0, y1 = fpr[k - 1], fpr[k], tpr[k - 1], tpr[k]
        if x0 >= alpha:
            break
        x = min(x1, alpha)
        yx = y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
        area += (x - x0) * (y0 + yx) / 2
    return area


def test_mcclish_equals_sklearn_with_and_without_ties():
    rng = np.random.default_rng(0)
    worst = 0.0
    for trial in range(300):
        n = int(rng.integers(6, 200))
        levels = int(rng.integers(2, 12))
        s = rng.integers(0, levels, n).astype(float) if trial % 2 else rng.normal(size=n)
        y = rng.integers(0, 2, n)
        if y.sum() < 2 or (1 - y).sum() < 2:
            continue
        table = truncated_auc(s, y, [0.05, 0.1, 0.2, 0.37, 0.5, 0.9]).set_index("cutoff")
        for a in table.index:
            worst = max(worst, abs(table.at[a, "mcclish"] - roc_auc_score(y, s, max_fpr=a)))
    assert worst <= 1e-12


def test_row_influence_is_the_derivative_of_the_linear_roc_partial_auc():
    """Finite differences of the functional (mixture within the row's class) vs the closed form, with ties."""
    rng = np.random.default_rng(1)
    N = 90
    s = rng.integers(0, 6, N).astype(float)
    y = (rng.random(N) < 0.4).astype(int)
    tab = BlockTable(build_grid(s, y.astype(bool)))
    rows = tab.rows(s)
    m, n = y.sum(), N - y.sum()
    for a in (0.1, 0.3, 0.55, 1.0):
        t = truncated_auc(s, y, [a])
        u = row_influence(tab, 0, 0, a, t.auc.iloc[0], t.roc_at_cutoff.iloc[0], rows,
                          np.zeros(N, dtype=int), y.astype(float), 1.0 - y)
        base = _weighted_pauc(s, y, np.ones(N), a)
        assert base == pytest.approx(t.auc.iloc[0], abs=1e-14)
        eps = 1e-7
        for r in range(N):
            w = np.ones(N)
            same = y == y[r]
            w[same] *= 1 - eps
            w[r] += eps * same.sum()
            derivative = (_weighted_pauc(s, y, w, a) - base) / eps
            assert u[r] == pytest.approx(derivative / (m if y[r] else n), abs=1e-7)
        # and the brute force's per-row values agree with the closed form
        _, _, infl = bf.influence_values(s, y, a)
        assert np.allclose(u, infl, atol=1e-13)


def test_one_row_per_cluster_reproduces_lemma3_exactly():
    """CR2 scales a lone positive's total by 1 / sqrt(1 - 1/m) (a negative's by 1 / sqrt(1 - 1/n)): Lemma 3's
    Bessel correction per class, so clusters of one give Lemma 3 itself."""
    rng = np.random.default_rng(2)
    N = 600
    y = (rng.random(N) < 0.35).astype(int)
    s = np.round(rng.normal(size=N) + y, 1)  # ties
    iid = truncated_auc(s, y, CUTS)
    one = truncated_auc(s, y, CUTS, clusters=np.arange(N))
    assert (one["variance_estimand"] == "clustered").all() and (iid["variance_estimand"] == "conditional").all()
    m, n = y.sum(), N - y.sum()
    assert np.allclose(one["variance"], iid["variance"], rtol=1e-9)
    assert np.allclose(one["auc"], iid["auc"], atol=0)


def test_duplicating_every_row_leaves_the_clustered_se_unchanged():
    rng = np.random.default_rng(3)
    N, k = 400, 6
    y = (rng.random(N) < 0.4).astype(int)
    s = rng.normal(size=N) + y
    g = rng.choice(["a", "b"], N)
    items = np.arange(N)
    once = compare_groups(s, y, g, CUTS, clusters=items)
    many = compare_groups(np.repeat(s, k), np.repeat(y, k), np.repeat(g, k), CUTS, clusters=np.repeat(items, k))
    many_iid = compare_groups(np.repeat(s, k), np.repeat(y, k), np.repeat(g, k), CUTS)
    assert np.allclose(once.groups["se"], many.groups["se"], rtol=1e-9)
    assert np.allclose(once.pairs["se"], many.pairs["se"], rtol=1e-9)
    # the iid SE shrinks by sqrt(k) although no information was added
    assert np.allclose(many.pairs["se"] / many_iid.pairs["se"], np.sqrt(k), rtol=0.02)
    x_once = xauc(s, y, g, clusters=items)
    x_many = xauc(np.repeat(s, k), np.repeat(y, k), np.repeat(g, k), clusters=np.repeat(items, k))
    assert np.allclose(x_once.deltas["se"], x_many.deltas["se"], rtol=1e-9)
    assert np.allclose(x_once.balanced_deltas["se"], x_many.balanced_deltas["se"], rtol=1e-9)


def _clustered_data(rng, n_clusters=60, size=8, groups_span=False):
    """Clusters of rows with a shared label tendency and score; discrete scores (ties)."""
    c = np.repeat(np.arange(n_clusters), size)
    effect = rng.normal(size=n_clusters)[c]
    y = (rng.random(c.size) < 1 / (1 + np.exp(-effect))).astype(int)
    s = np.round(effect + 0.8 * y + rng.normal(scale=0.5, size=c.size), 0)
    g = rng.choice(["a", "b"], c.size) if groups_span else np.where(c % 2, "a", "b")
    return s, y, g, c


@pytest.mark.parametrize("groups_span", [False, True])
def test_clustered_variances_and_covariances_match_brute_force(groups_span):
    """CR2: each cluster's positives' and negatives' parts scaled by 1 / sqrt(1 - its share of the column's class)."""
    rng = np.random.default_rng(4)
    s, y, g, c = _clustered_data(rng, groups_span=groups_span)
    cuts = CUTS[2:]  # 28-29 clusters per class: fewer than 5 negative clusters below FPR 0.1 (not estimable)
    res = compare_groups(s, y, g, cuts, clusters=c, min_count=2, min_clusters=2)
    parts = {}
    for name in ("a", "b"):
        for a in cuts:
            sel = g == name
            _, _, u = bf.influence_values(s[sel], y[sel], a)
            full = np.zeros(s.size)
            full[sel] = u
            parts[name, a] = bf.split_by_class(full, y, sel)
            got = res.groups[(res.groups["group"] == name) & (res.groups["cutoff"] == a)]["variance"].iloc[0]
            assert got == pytest.approx(bf.cr2_variance(parts[name, a], c), rel=1e-9)
    for a in cuts:
        minus_b = [(-u, members) for u, members in parts["b", a]]
        got = res.pairs[res.pairs["cutoff"] == a]["se"].iloc[0] ** 2
        assert got == pytest.approx(bf.cr2_variance(parts["a", a] + minus_b, c), rel=1e-9)


def test_cr1_covariance_is_still_the_liang_zeger_sandwich():
    """The unadjusted pass (kept for comparison) is C/(C-1) sum of squared per-cluster influence sums."""
    from fair_pipeline.audit.stats.clustered import row_clusters
    from fair_pipeline.audit.stats.grid_audit import run_grid_audit

    rng = np.random.default_rng(4)
    s, y, g, c = _clustered_data(rng, groups_span=True)
    codes = (g == "b").astype(np.intp)
    res = run_grid_audit(build_grid(s, y, codes, np.array(["a", "b"], dtype=object)), CUTS, xauc=False,
                         clusters=row_clusters(c, s, y, codes))
    for k, a in enumerate(res["cov_alphas"]):
        _, _, u = bf.influence_values(s[g == "a"], y[g == "a"], a)
        full = np.zeros(s.size)
        full[g == "a"] = u
        assert res["cov_cr1"][k, 0, 0] == pytest.approx(bf.clustered_variance(full, c), rel=1e-9)


def test_xauc_delta_covariance_with_click_labels_matches_brute_force():
    """An item with clicks and skips feeds xAUC(a, b) as a positive and xAUC(b, a) as a negative."""
    rng = np.random.default_rng(5)
    s, y, g, c = _clustered_data(rng, n_clusters=80)
    res = xauc(s, y, g, clusters=c)

    def delong_parts(pos_sel, neg_sel, sign):
        pos, neg = s[pos_sel], s[neg_sel]
        k = bf.h(pos, neg)
        up, un = np.zeros(s.size), np.zeros(s.size)
        up[pos_sel] = sign * (k.mean(axis=1) - k.mean()) / pos.size
        un[neg_sel] = sign * (k.mean(axis=0) - k.mean()) / neg.size
        return [(up, pos_sel), (un, neg_sel)]

    pa, na, pb, nb = (g == "a") & (y == 1), (g == "a") & (y == 0), (g == "b") & (y == 1), (g == "b") & (y == 0)
    parts = delong_parts(pa, nb, 1.0) + delong_parts(pb, na, -1.0)
    assert res.deltas["se"].iloc[0] ** 2 == pytest.approx(bf.cr2_variance(parts, c), rel=1e-9)


def test_two_way_clustering_is_item_plus_query_minus_intersection():
    rng = np.random.default_rng(6)
    s, y, g, items = _clustered_data(rng, n_clusters=50, size=6)
    queries = rng.integers(0, 40, s.size)
    both = truncated_auc(s, y, CUTS, clusters=(items, queries))
    assert (both["variance_estimand"] == "two_way").all()
    everyone = np.ones(s.size, dtype=bool)
    for a in CUTS:
        _, _, u = bf.influence_values(s, y, a)
        parts = bf.split_by_class(u, y, everyone)
        cells = items * 1000 + queries
        want = bf.cr2_variance(parts, items) + bf.cr2_variance(parts, queries) - bf.cr2_variance(parts, cells)
        assert both.set_index("cutoff").at[a, "variance"] == pytest.approx(max(want, 0.0), rel=1e-9)


def test_cluster_bootstrap_agrees_on_small_data():
    rng = np.random.default_rng(7)
    s, y, g, c = _clustered_data(rng, n_clusters=120, size=5)
    got = truncated_auc(s, y, [0.3, 1.0], clusters=c).set_index("cutoff")["se"]
    reps = []
    ids = np.unique(c)
    rows = [np.flatnonzero(c == k) for k in ids]
    for _ in range(600):
        pick = np.concatenate([rows[k] for k in rng.choice(ids.size, ids.size)])
        if y[pick].sum() < 2 or (1 - y[pick]).sum() < 2:
            continue
        reps.append(truncated_auc(s[pick], y[pick], [0.3, 1.0])["auc"].to_numpy())
    boot = np.std(reps, axis=0, ddof=1)
    assert np.allclose(got.to_numpy(), boot, rtol=0.15), (got.to_numpy(), boot)


def test_aggregates_with_cluster_column_equal_row_level_input():
    rng = np.random.default_rng(8)
    s, y, g, c = _clustered_data(rng, groups_span=True)
    rows = pd.DataFrame({"item": c, "group": g, "score": s, "y": y})
    agg = rows.groupby(["item", "group", "score"])["y"].agg(n_pos="sum", n="count").reset_index()
    agg["n_neg"] = agg["n"] - agg["n_pos"]
    from_agg = audit_aggregates(agg, CUTS, cluster_cols=["item"], min_count=2)
    direct = compare_groups(s, y, g, CUTS, clusters=c, min_count=2)
    assert np.allclose(from_agg.groups["variance"], direct.groups["variance"], rtol=1e-12, equal_nan=True)
    assert np.allclose(from_agg.pairs["se"], direct.pairs["se"], rtol=1e-12, equal_nan=True)
    assert np.allclose(from_agg.xauc.deltas["se"], xauc(s, y, g, clusters=c).deltas["se"], rtol=1e-12, equal_nan=True)


def test_bad_clusters_are_named():
    s, y = np.arange(10.0), np.r_[np.zeros(5), np.ones(5)]
    with pytest.raises(AuditInputError, match="clusters\\[0\\] must be 1-dimensional of length 10"):
        truncated_auc(s, y, clusters=np.arange(9))
    with pytest.raises(AuditInputError, match="NaN"):
        truncated_auc(s, y, clusters=np.r_[np.arange(9.0), np.nan])
    with pytest.raises(AuditInputError, match="at least 2 clusters"):
        truncated_auc(s, y, clusters=np.zeros(10))


def _clustered_file(tmp_path, rng, distinct_scores=False):
    C = 300
    item = np.repeat(np.arange(C), rng.integers(1, 12, C))
    effect = rng.normal(size=C)[item]
    y = (rng.random(item.size) < 1 / (1 + np.exp(-effect))).astype(int)
    s = effect + 0.5 * y + rng.normal(scale=0.5, size=item.size)
    s = s if distinct_scores else np.round(s, 1)  # distinct scores: the cluster pass sorts rows, no GROUP BY
    g = np.where(item % 3 == 0, "a", "b")
    q = rng.integers(0, 80, item.size)
    path = tmp_path / "clustered.parquet"
    pd.DataFrame({"score": s, "y": y, "grp": g, "item": [f"it{i}" for i in item], "q": q}).to_parquet(path)
    return path, s, y, g, item, q


@pytest.mark.parametrize("two_way, distinct_scores", [(False, False), (True, False), (False, True), (True, True)])
def test_file_audit_streams_the_cluster_pass_like_in_memory(tmp_path, two_way, distinct_scores):
    """Small batches: clusters continue across batch boundaries (the carry) and still sum once."""
    from fair_pipeline.audit.files import audit_file

    path, s, y, g, item, q = _clustered_file(tmp_path, np.random.default_rng(9), distinct_scores)
    assert (np.unique(s).size == s.size) == distinct_scores
    cols, clusters = (["item", "q"], (item, q)) if two_way else (["item"], item)
    got = audit_file(path, "score", "y", "grp", clusters=cols, batch_rows=97).report
    want = compare_groups(s, y, g, clusters=clusters)
    assert np.allclose(got.groups["variance"], want.groups["variance"], rtol=1e-10, equal_nan=True)
    assert np.allclose(got.pairs["se"], want.pairs["se"], rtol=1e-10, equal_nan=True)
    assert np.allclose(got.xauc.deltas["se"], xauc(s, y, g, clusters=clusters).deltas["se"], rtol=1e-10, equal_nan=True)
    assert (got.groups["variance_estimand"] == ("two_way" if two_way else "clustered")).all()
    assert np.allclose(got.pairs["df"], want.pairs["df"], rtol=1e-9, equal_nan=True)  # design sums streamed alike


def test_cli_cluster_option_names_the_estimand_and_bad_columns(tmp_path, capsys):
    from fair_pipeline.commands import main

    path, *_ = _clustered_file(tmp_path, np.random.default_rng(10))
    assert main(["audit", str(path), "--score", "score", "--label", "y", "--group", "grp", "--cluster", "item"]) == 0
    out = capsys.readouterr().out
    assert "cluster-robust variance, clustered by item (300 clusters" in out
    assert main(["audit", str(path), "--score", "score", "--label", "y", "--cluster", "nope"]) == 2
    assert "--cluster column 'nope' not found" in capsys.readouterr().err


def test_cli_min_clusters_decides_which_groups_get_a_clustered_ci(tmp_path, capsys):
    import json

    from fair_pipeline.commands import main

    path, s, y, g, item, q = _clustered_file(tmp_path, np.random.default_rng(11))
    a_items = {lab: len(np.unique(item[(g == "a") & (y == lab)])) for lab in (0, 1)}  # of group a's ~100 items
    pos_items = min(a_items.values())
    args = ["audit", str(path), "--score", "score", "--label", "y", "--group", "grp", "--cluster", "item", "--json",
            "--cutoffs", "1"]
    groups = {}
    for minimum in (pos_items, pos_items + 1):
        assert main(args + ["--min-clusters", str(minimum)]) == 0
        groups[minimum] = {r["group"]: r for r in json.loads(capsys.readouterr().out)["groups"]}
    a = groups[pos_items]["a"]
    assert a["estimable"] and (a["clusters_neg"], a["clusters_pos"]) == (a_items[0], a_items[1])
    assert not groups[pos_items + 1]["a"]["estimable"] and groups[pos_items + 1]["b"]["estimable"]
    assert f"need >= {pos_items + 1} each" in groups[pos_items + 1]["a"]["note"]
    with pytest.raises(SystemExit) as exit_code:
        main(args + ["--min-clusters", "1"])
    assert exit_code.value.code == 2
    assert "--min-clusters: expected an integer >= 2" in capsys.readouterr().err


def test_cluster_benchmark_command_runs_and_reports_the_ratio(capsys):
    """`python benchmarks/bench_clustered_audit.py` (README), on a tiny file."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_clustered_audit.py"
    spec = importlib.util.spec_from_file_location("bench_clustered_audit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--rows", "20000", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "clustered / iid: wall" in out and "iid / sort:      wall" in out and "2,000 clusters" in out


def test_cluster_batches_hold_whole_clusters_and_every_row_once():
    from fair_pipeline.audit.stats.clustered import ClusterRows
    from fair_pipeline.audit.stats.grid_audit import cluster_batches

    rng = np.random.default_rng(3)
    n = 5000
    keys = rng.integers(0, 400, n)
    rows = ClusterRows(keys, rng.integers(0, 2, n), rng.normal(size=n), np.arange(n, dtype=float), np.ones(n))
    batches = list(cluster_batches(keys, rows, batch_rows=333))
    assert len(batches) > 10 and all(b[0].size <= 333 + np.bincount(keys).max() for b in batches)
    seen = np.concatenate([b[3] for b in batches]).astype(int)  # n_pos carries the row index
    assert sorted(seen.tolist()) == list(range(n))
    firsts = [set(b[0].tolist()) for b in batches]
    assert all(a.isdisjoint(b) for k, a in enumerate(firsts) for b in firsts[k + 1:])  # no cluster split
    for b in batches:  # a cluster's rows keep their order, so its influence sums are added as in one batch
        assert np.all(np.diff(b[0]) >= 0)
        for key in np.unique(b[0]):
            assert np.all(np.diff(b[3][b[0] == key]) > 0)
    (whole,) = cluster_batches(keys, rows, batch_rows=n)  # small inputs: one batch, the arrays as given
    assert whole[0] is keys or np.shares_memory(whole[0], keys)


@pytest.mark.parametrize("cols", [["item_id"], ["item_id", "query_id"]])
def test_cluster_pass_in_batches_equals_one_batch(monkeypatch, cols):
    """The in-memory cluster-robust pass runs in batches of whole clusters (memory); the reported tables are
    those of one batch: exactly for labels and counts, to 1e-12 for the estimates."""
    from fair_pipeline.audit.stats import grid_audit

    rng = np.random.default_rng(7)
    n = 20_000
    df = pd.DataFrame({"group": rng.choice(["a", "b", "c"], n), "item_id": rng.integers(0, 700, n).astype(str),
                       "query_id": rng.integers(0, 300, n).astype(str), "score": rng.normal(size=n).round(2),
                       "n_pos": rng.integers(0, 3, n), "n_neg": rng.integers(0, 3, n)})
    estimand = "item_clustered" if len(cols) == 1 else "two_way"
    one = audit_aggregates(df, cluster_cols=cols, estimand=estimand)
    monkeypatch.setattr(grid_audit, "CLUSTER_BATCH_ROWS", 997)
    batched = audit_aggregates(df, cluster_cols=cols, estimand=estimand)
    for name in ("groups", "pairs", "overall"):
        a, b = getattr(one, name), getattr(batched, name)
        floats = [c for c in a.columns if a[c].dtype.kind == "f"]
        pd.testing.assert_frame_equal(a.drop(columns=floats), b.drop(columns=floats))
        np.testing.assert_allclose(b[floats].to_numpy(), a[floats].to_numpy(), rtol=1e-12, atol=1e-15)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas"):
        a, b = getattr(one.xauc, name), getattr(batched.xauc, name)
        floats = [c for c in a.columns if a[c].dtype.kind == "f"]
        pd.testing.assert_frame_equal(a.drop(columns=floats), b.drop(columns=floats))
        np.testing.assert_allclose(b[floats].to_numpy(), a[floats].to_numpy(), rtol=1e-12, atol=1e-15)
