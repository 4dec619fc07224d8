"""The audit on Spark (`audit.spark_audit`: scored on the executors, swept per score range from partition offsets)
equals the DuckDB path of the same rows (`audit.streamed`) to 1e-12, ties, three groups and many partitions
included (sklearn's tie convention: a tied block is a linear ROC segment)."""
import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fair_pipeline.audit import AuditInputError
from fair_pipeline.audit.evaluation import EvaluationData, audit_output
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.spark_audit import audit_spark_rows
from fair_pipeline.audit.streamed import audit_spilled, frame_rows
from tests.audit.tables import assert_tables_close

CUTS = [0.05, 0.1, 0.3, 1.0]
GROUPS = ['a "quoted"', "b+ <i>", "в"]


def _rows(n: int, ties: bool, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(3, n, p=[0.5, 0.4, 0.1])
    score = rng.normal(size=n) + 0.3 * g
    return pd.DataFrame({"group": np.array(GROUPS, dtype=object)[g], "score": score.round(1) if ties else score,
                         "n_pos": rng.integers(0, 3, n).astype(float), "n_neg": rng.integers(0, 3, n).astype(float)})


def rescore(frame):  # a within-group monotone map, like the EO transforms
    return np.where(frame["group"] == GROUPS[0], 2.0 * frame["score"].to_numpy() + 0.5, frame["score"].to_numpy())


def _duckdb_audit(tmp_path, df):
    with duckdb.connect() as con:
        return audit_spilled(con, frame_rows(df, (), str(tmp_path), "rows"), rescore, "test", CUTS, min_count=10,
                             confidence=0.95, estimand="conditional")


def test_the_sessions_setting_chooses_the_score_ranges(spark, tmp_path, monkeypatch):
    """`--spark-conf spark.fair_pipeline.audit.partitions=N` sets the ranges of an audit that names none (the
    pipeline's): the same report, N tasks a stage; a value that is not a positive integer is named."""
    from fair_pipeline.audit import spark_audit

    df, ranges = _rows(2_000, False), []
    counts = spark_audit._partition_counts

    def counted(ranged, groups):  # one row per non-empty range: every distinct score is its own block here
        found = counts(ranged, groups)
        ranges.append(len(found))
        return found

    monkeypatch.setattr(spark_audit, "_partition_counts", counted)
    before = spark.conf.get(spark_audit.PARTITIONS_CONF, None)  # the shared session's, put back after
    try:
        spark.conf.unset(spark_audit.PARTITIONS_CONF)
        assert spark_audit.session_partitions(spark.createDataFrame(df)) == spark_audit.DEFAULT_PARTITIONS
        spark.conf.set(spark_audit.PARTITIONS_CONF, "3")
        got, _ = audit_spark_rows(spark.createDataFrame(df), rescore, "test", CUTS, min_count=10, confidence=0.95,
                                  estimand="conditional")
        spark.conf.set(spark_audit.PARTITIONS_CONF, "0")
        with pytest.raises(ValueError, match="spark.fair_pipeline.audit.partitions='0' must be a positive integer"):
            audit_spark_rows(spark.createDataFrame(df), rescore, "test", CUTS, min_count=10, confidence=0.95)
    finally:
        spark.conf.unset(spark_audit.PARTITIONS_CONF)
        if before is not None:
            spark.conf.set(spark_audit.PARTITIONS_CONF, before)
    assert ranges == [3]
    want = _duckdb_audit(tmp_path, df)
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got, name), getattr(want, name), name)

@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("partitions", [1, 7])
def test_spark_audit_equals_the_duckdb_path(spark, tmp_path, ties, partitions):
    df = _rows(4_000, ties)
    assert (df["score"].nunique() < 100) == ties
    got, rows = audit_spark_rows(spark.createDataFrame(df).repartition(5), rescore, "test", CUTS, min_count=10,
                                 confidence=0.95, estimand="conditional", partitions=partitions)
    want = _duckdb_audit(tmp_path, df)
    assert rows == len(df)
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got, name), getattr(want, name), name)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas", "curves"):
        assert_tables_close(getattr(got.xauc, name), getattr(want.xauc, name), f"xauc.{name}")
    # and, at FPR 1, scikit-learn's AUC of the expanded rows (ties: half credit) for every group
    scores = rescore(df)
    for group in GROUPS:
        sel = (df["group"] == group).to_numpy()
        y = np.r_[np.ones(int(df["n_pos"][sel].sum())), np.zeros(int(df["n_neg"][sel].sum()))]
        s = np.r_[np.repeat(scores[sel], df["n_pos"][sel].astype(int)), np.repeat(scores[sel], df["n_neg"][sel].astype(int))]
        row = got.groups[(got.groups["group"] == group) & (got.groups["cutoff"] == 1.0)]
        assert row["auc"].iloc[0] == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_bad_scores_and_missing_groups_are_named(spark):
    df = _rows(300, ties=False)

    def with_nan(frame):
        out = rescore(frame)
        out[:2] = np.nan
        return out

    rows = spark.createDataFrame(df).coalesce(1)
    with pytest.raises(AuditInputError, match=r"test: 2 scores are NaN or infinite"):
        audit_spark_rows(rows, with_nan, "test", CUTS, min_count=10, confidence=0.95)
    missing = spark.createDataFrame(df.assign(group=df["group"].where(df.index % 50 != 0, None)))
    with pytest.raises(AuditInputError, match=r"aggregates.group has 6 missing values"):
        audit_spark_rows(missing, rescore, "test", CUTS, min_count=10, confidence=0.95)
    # A scorer's error found on the executors: the audit's own input error on the driver, its message alone.
    with pytest.raises(AuditInputError, match=r"^test: scorer returned shape \(1,\) for \d+ rows$"):
        audit_spark_rows(rows, lambda frame: np.zeros(1), "test", CUTS, min_count=10, confidence=0.95)


@pytest.mark.parametrize(("variance", "cluster_cols"), [("conditional", ()), ("item_clustered", ("item_id",))])
def test_the_assets_evaluation_audits_logged_score_outputs_on_the_executors(spark, tmp_path, variance, cluster_cols):
    """`audit_output` with the held-out rows as a Spark DataFrame (the asset on Spark; item-clustered is the
    default variance) gives the report and row count of the DuckDB path's spilled rows."""
    df = _clustered_rows(2_000, ties=True, seed=3).drop(columns=["query_id", *({"item_id"} - set(cluster_cols))])
    output = ScoredOutput("eo_transform", "a within-group monotone map", "logged_score", rescore)
    on_spark = EvaluationData(None, None, None, variance=variance, cluster_cols=cluster_cols,
                              spark_rows=spark.createDataFrame(df))
    options = dict(min_count=10, confidence=0.95)
    got = audit_output(output, on_spark, dt.date(2026, 1, 1), CUTS, **options)
    with duckdb.connect() as con:
        local = EvaluationData(None, None, None, variance=variance, cluster_cols=cluster_cols,
                               spilled=frame_rows(df, cluster_cols, str(tmp_path), "rows"))
        want = audit_output(output, local, dt.date(2026, 1, 1), CUTS, con=con, **options)
    assert got.rows == want.rows == len(df)
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got.report, name), getattr(want.report, name), name)
    assert_tables_close(got.roc_curves, want.roc_curves, "roc_curves")


def _clustered_rows(n: int, ties: bool, seed: int = 5) -> pd.DataFrame:
    """Rows with item and query keys (items repeat across queries; some ids are quoted or non-Latin)."""
    df = _rows(n, ties, seed)
    rng = np.random.default_rng(seed + 1)
    items = np.array([f"item {k}" for k in range(120)] + ['i"q', "品目", "a+b"], dtype=object)
    return df.assign(item_id=items[rng.integers(0, items.size, n)], query_id=rng.integers(0, 40, n))


@pytest.mark.parametrize(("variance", "cluster_cols", "ties", "partitions"), [
    ("item_clustered", ("item_id",), True, 7), ("item_clustered", ("item_id",), False, 1),
    ("two_way", ("item_id", "query_id"), False, 5)])
def test_clustered_spark_audit_equals_the_duckdb_path(spark, tmp_path, variance, cluster_cols, ties, partitions):
    """Cluster-robust variances (CR2, CR1-based df, cluster counts) from influence sums per cluster shuffled on
    the executors equal the DuckDB path's one sorted pass of the same rows."""
    df = _clustered_rows(3_000, ties)
    got, rows = audit_spark_rows(spark.createDataFrame(df).repartition(4), rescore, "test", CUTS, min_count=10,
                                 confidence=0.95, estimand=variance, cluster_cols=cluster_cols,
                                 partitions=partitions)
    with duckdb.connect() as con:
        want = audit_spilled(con, frame_rows(df, cluster_cols, str(tmp_path), "rows"), rescore, "test", CUTS,
                             min_count=10, confidence=0.95, estimand=variance)
    assert rows == len(df)
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got, name), getattr(want, name), name)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas", "curves"):
        assert_tables_close(getattr(got.xauc, name), getattr(want.xauc, name), f"xauc.{name}")
    iid = _duckdb_audit(tmp_path, df)  # the clusters matter: the variances are not the iid ones
    assert not np.allclose(got.groups["se"].to_numpy(float), iid.groups["se"].to_numpy(float), equal_nan=True)


def test_clustered_spark_audit_names_missing_cluster_keys(spark):
    df = _clustered_rows(300, ties=False)
    df["item_id"] = df["item_id"].where(df.index % 100 != 0, None)
    with pytest.raises(AuditInputError, match=r"aggregates.item_id has 3 missing values"):
        audit_spark_rows(spark.createDataFrame(df), rescore, "test", CUTS, min_count=10, confidence=0.95,
                         cluster_cols=("item_id",))
