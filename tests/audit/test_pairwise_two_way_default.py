"""Two-way (item x query) clustered pairwise accuracies are the default wherever the pipeline and the CLI compute them,
with the estimand stated and the items, queries and effective clusters beside n: the streamed CLI path and the
pipeline's evaluation equal `pairwise_accuracies(clusters=(items, queries))` exactly, and fall back to query
clustering only when no item ids exist (and say so)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import pairwise_accuracies
from fair_pipeline.audit.evaluation import EvaluationData, OutputAudit, pairwise_for
from fair_pipeline.audit.files import audit_file
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.report import _pairwise, pairwise_markdown, pairwise_rows
from fair_pipeline.audit.store import conform
from fair_pipeline.audit.stats.pairwise_cells import TwoWayMoments
from fair_pipeline.audit.stats.pairwise_clustered import PairwiseClusters
from fair_pipeline.audit.stats.pairwise_moments import pairwise_contrasts
from fair_pipeline.audit.stats.small_sample import cluster_robust_interval

GROUPS = ['a "quoted" +1', "女性", "&lt;b&gt;"]
COLUMNS = ["accuracy", "se", "ci_low", "ci_high", "df", "n_pairs", "n_items", "n_queries"]


def _log(seed: int = 3, n: int = 4000) -> pd.DataFrame:
    """Items repeat across queries (popular items shown often) and carry their own relevance and score effect."""
    rng = np.random.default_rng(seed)
    n_items = 250
    popularity = rng.pareto(1.5, n_items) + 1
    item = rng.choice(n_items, n, p=popularity / popularity.sum())
    effect = rng.normal(size=n_items)
    group = np.array(GROUPS, dtype=object)[item % 3]
    score = np.round(effect[item] + rng.normal(size=n), 1)  # ties inside queries
    label = (effect[item] + rng.normal(size=n) > 0).astype(int)
    return pd.DataFrame({"query_id": [f"q{q}" for q in rng.integers(0, 120, n)], "item_id": [f"i'{i}" for i in item],
                         "grp": group, "score": score, "label": label})


def _reference(log: pd.DataFrame):
    return pairwise_accuracies(log["score"], log["label"], log["grp"], log["query_id"],
                               clusters=(log["item_id"].to_numpy(), log["query_id"].to_numpy()))


KEYS = {"matrix": ["group_better", "group_worse"], "marginals": ["role", "group"], "overall": ["metric"],
        "gaps": ["group_a", "group_b"]}


def _assert_same(got, ref, rtol=1e-12):
    for name, keys in KEYS.items():
        g, r = getattr(got, name), getattr(ref, name)
        if name == "gaps":  # a pair's order follows the order of the levels: orient both alike
            g, r = _oriented(g), _oriented(r)
        g, r = g.sort_values(keys).reset_index(drop=True), r.sort_values(keys).reset_index(drop=True)
        assert g[keys].equals(r[keys]), name
        assert (g["variance_estimand"] == "two_way").all(), name
        for column in [c for c in COLUMNS + ["gap", "p_value"] if c in r.columns and c in g.columns]:
            np.testing.assert_allclose(g[column].to_numpy(float), r[column].to_numpy(float), rtol=rtol, atol=1e-15,
                                       err_msg=f"{name}.{column}")


def _oriented(gaps: pd.DataFrame) -> pd.DataFrame:
    """Gaps as A_{a>b} - A_{b>a} with a before b in GROUPS (the reference sorts its levels)."""
    flip = gaps["group_a"].map(GROUPS.index) > gaps["group_b"].map(GROUPS.index)
    out = gaps.copy()
    out.loc[flip, ["group_a", "group_b"]] = gaps.loc[flip, ["group_b", "group_a"]].to_numpy()
    for column in ("gap", "ci_low", "ci_high"):
        if column in out:
            out.loc[flip, column] = -gaps.loc[flip, column]
    out.loc[flip, ["ci_low", "ci_high"]] = out.loc[flip, ["ci_high", "ci_low"]].to_numpy()
    out.loc[flip, ["A_a>b", "A_b>a"]] = gaps.loc[flip, ["A_b>a", "A_a>b"]].to_numpy()
    return out


def test_streamed_two_way_moments_equal_the_all_rows_computation_chunk_by_chunk():
    log = _log()
    q = pd.factorize(log["query_id"])[0]
    item = pd.factorize(log["item_id"])[0]
    g = pd.factorize(log["grp"])[0]
    s, y = log["score"].to_numpy(float), log["label"].to_numpy(bool)
    pc = PairwiseClusters((item, q), q, s, g, y, 3)
    ref = pc.moments(pairwise_contrasts(3)).results()
    two_way = TwoWayMoments(3, pc.total_T, pc.total_C, item.max() + 1)
    for chunk in np.array_split(np.unique(q), 7):
        rows = np.isin(q, chunk)
        two_way.update(q[rows], item[rows], s[rows], g[rows], y[rows])
    got = two_way.result().results()
    for key in ("estimate", "variance", "variance_cr1", "df", "clusters"):
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-12, atol=1e-18, err_msg=key)


def test_cli_file_audit_is_two_way_with_an_item_column_and_says_query_clustered_without(tmp_path):
    log = _log()
    path = tmp_path / "log with 'quotes'.parquet"
    log.to_parquet(path)
    ref = _reference(log)
    two_way = audit_file(path, "score", "label", "grp", "query_id", clusters=["item_id", "query_id"],
                         batch_rows=301).pairwise
    _assert_same(two_way, ref)
    assert two_way.matrix["n_items"].min() > 10 and (two_way.matrix["df"] < two_way.matrix["n_items"]).all()
    plain = audit_file(path, "score", "label", "grp", "query_id", batch_rows=301).pairwise
    assert (plain.gaps["variance_estimand"] == "query_clustered").all()
    # popular items repeat across queries: the query-only SE misses the item variance
    assert (two_way.gaps["se"] > 1.5 * plain.gaps["se"]).all()



@pytest.mark.parametrize("spread", [3, 10**6])  # 3: a compact range, the id less the lowest is the code; else a join
def test_cli_file_audit_with_integer_item_ids_equals_the_all_rows_computation(tmp_path, spread):
    log = _log(seed=5)
    log["item_id"] = spread * pd.factorize(log["item_id"])[0] - 40  # negative ids, gaps between them
    path = tmp_path / "integer items.parquet"
    log.to_parquet(path)
    got = audit_file(path, "score", "label", "grp", "query_id", clusters=["item_id", "query_id"], batch_rows=301)
    _assert_same(got.pairwise, _reference(log))
    assert got.pairwise.matrix["n_items"].min() > 10

def _output() -> ScoredOutput:
    return ScoredOutput("production", "logged score", "logged_score", lambda frame: frame["score"].to_numpy(float))


def test_the_pipeline_pairwise_audit_is_two_way_and_the_report_states_the_estimand():
    log = _log()
    rows = (log.assign(n_pos=log["label"], n_neg=1 - log["label"]).rename(columns={"grp": "group"})
            .groupby(["query_id", "group", "item_id", "score"], as_index=False)[["n_pos", "n_neg"]].sum())
    data = EvaluationData(score_counts=None, item_counts=None, query_rows=rows, queries_in_window=120)
    result, note, used = pairwise_for(_output(), data, GROUPS, 0.95)
    assert used == 120 and "120 of 120 queries" in note
    _assert_same(result, _reference(log), rtol=1e-10)

    audit = OutputAudit(_output(), True, len(rows), None, pd.DataFrame(), result, note, used)
    markdown = pairwise_markdown(audit)
    assert "for new items and new queries" in markdown and "| items | queries | effective clusters |" in markdown
    stored = conform("fairness_audit_pairwise", pairwise_rows(audit))  # as the warehouse keeps it
    for table in _pairwise("production", stored):
        assert (table["variance_estimand"] == "two_way").all()
        assert table["n_items"].notna().all() and table["df"].notna().all()


def test_report_section_names_the_estimand_and_the_clusters():
    from fair_pipeline.reporting.pairwise import pairwise_gap_table, sample_text

    rows = pd.DataFrame({"n_pairs": [1200.0], "n_items": [80], "n_queries": [40], "df": [17.25]})
    assert sample_text(rows).iloc[0] == "pairs = 1,200, items = 80, queries = 40, effective clusters = 17.2"
    assert "sample" in pairwise_gap_table(pd.DataFrame({
        "model": ["m"], "group_a": ["x"], "group_b": ["y"], "verdict": ["inconclusive"], "estimate": [0.1],
        "ci_low": [-0.1], "ci_high": [0.3], "margin": [0.05], "p_value": [0.3], "p_holm": [np.nan],
        "p_tost": [0.6], **{k: v for k, v in rows.items()}})).columns


def test_old_stored_tables_read_as_query_clustered():
    from fair_pipeline.audit.report import _clusters

    assert _clusters(pd.DataFrame({"x": [1]}))["variance_estimand"].tolist() == ["query_clustered"]


def test_the_df_is_the_one_every_clustered_ci_takes_from_its_cluster_totals():
    """One-way item clustering: each figure's variance and df equal `small_sample.cluster_robust_interval` of its
    per-cluster parts and shares (the smaller of the effective clusters and the parts' design df)."""
    log = _log(seed=9)
    q = pd.factorize(log["query_id"])[0]
    item = pd.factorize(log["item_id"])[0]
    g = pd.factorize(log["grp"])[0]
    pc = PairwiseClusters(item, q, log["score"].to_numpy(float), g, log["label"].to_numpy(bool), 3)
    contrasts = pairwise_contrasts(3)
    got = pc.moments(contrasts).results()
    (T, C), tot_T, tot_C = pc._sums[0], pc.total_T, pc.total_C
    for j, name in enumerate(contrasts.names):
        if name[0] not in ("matrix", "gap"):
            continue
        a, b = name[1:]
        cells = [(a, b, 1.0)] if name[0] == "matrix" else [(a, b, 1.0), (b, a, -1.0)]
        parts = np.array([w * (C[:, x, y] - tot_C[x, y] / tot_T[x, y] * T[:, x, y]) / tot_T[x, y] for x, y, w in cells])
        shares = np.array([T[:, x, y] / tot_T[x, y] for x, y, _ in cells])
        want = cluster_robust_interval(got["estimate"][j], parts, shares)
        assert got["variance"][j] == pytest.approx(want.se ** 2, rel=1e-12), name
        assert got["df"][j] == pytest.approx(want.df, rel=1e-12), name

