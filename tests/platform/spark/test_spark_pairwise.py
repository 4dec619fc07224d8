"""Pairwise accuracies on Spark's executors (`audit.spark_pairwise`) equal the in-memory two-way clustered path
(`pairwise_from_counts` with item ids) to 1e-12: accuracies, pair counts, CR2 SEs, Satterthwaite df, item and query
counts, gaps and their verdicts; quoted, HTML and non-Latin group labels, three groups, ties, items in several
queries and in several rows of a query, many partitions and small Arrow batches (queries split across batches)."""
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError
from fair_pipeline.audit.evaluation import EvaluationData, pairwise_for
from fair_pipeline.audit.outputs import ScoredOutput
from fair_pipeline.audit.spark_pairwise import pairwise_spark_rows
from fair_pipeline.audit.stats.pairwise import pairwise_from_counts

GROUPS = ['a "quoted" +1', "&lt;i&gt;", "女性"]
TABLES = {"matrix": ["group_better", "group_worse"], "marginals": ["metric"], "overall": ["metric"],
          "parity": ["group_i", "group_j"], "gaps": ["group_a", "group_b"]}


def _rows(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    """Aggregate rows (query, group, item, score -> n_pos, n_neg), as `audit.sql.query_rows` makes them."""
    rng = np.random.default_rng(seed)
    popularity = rng.pareto(1.3, 150) + 1
    item = rng.choice(150, n, p=popularity / popularity.sum())
    effect = rng.normal(size=150)
    return pd.DataFrame({"query_id": [f"q'{q}" for q in rng.integers(0, 90, n)], "item_id": [f"i{i}" for i in item],
                         "group": np.array(GROUPS, dtype=object)[item % 3],
                         "score": np.round(effect[item] + rng.normal(size=n), 1),
                         "n_pos": rng.integers(0, 3, n).astype(float), "n_neg": rng.integers(0, 3, n).astype(float)})


def rescore(frame):  # the output's score, computed where the rows are
    return 2.0 * frame["score"].to_numpy(float) - 1.0


@pytest.fixture(scope="module")
def small_batches(spark):
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "97")
    yield spark
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)


def test_spark_pairwise_equals_the_in_memory_two_way_path(small_batches, partitions=4):
    df = _rows()
    got, n_queries = pairwise_spark_rows(small_batches.createDataFrame(df).repartition(3), rescore, "test", GROUPS,
                                         partitions=partitions, margins={"pairwise_accuracy": 0.05})
    assert n_queries == df["query_id"].nunique()
    want = pairwise_from_counts(df["query_id"], df["group"], rescore(df), df["n_pos"], df["n_neg"], GROUPS,
                                item_ids=df["item_id"], margins={"pairwise_accuracy": 0.05})
    for name, keys in TABLES.items():
        g = getattr(got, name).sort_values(keys).reset_index(drop=True)
        w = getattr(want, name).sort_values(keys).reset_index(drop=True)
        assert list(g.columns) == list(w.columns), name
        for column in w.columns:
            if pd.api.types.is_numeric_dtype(w[column]) and not pd.api.types.is_bool_dtype(w[column]):
                np.testing.assert_allclose(g[column].to_numpy(float), w[column].to_numpy(float), rtol=1e-12,
                                           atol=1e-15, err_msg=f"{name}.{column}")
            else:
                assert g[column].tolist() == w[column].tolist(), f"{name}.{column}"
    assert (got.gaps["variance_estimand"] == "two_way").all() and got.matrix["n_items"].min() > 10


def test_spark_pairwise_names_missing_ids(spark):
    df = _rows(200).astype({"item_id": object})
    df.loc[3, "item_id"] = None
    # Found on the executors, raised on the driver as the DuckDB path's input error: its message alone.
    with pytest.raises(AuditInputError, match=r"^pairwise rows: item_id has 1 missing values$") as raised:
        pairwise_spark_rows(spark.createDataFrame(df), rescore, "test", GROUPS, partitions=2)
    assert type(raised.value) is AuditInputError and "PythonException" in type(raised.value.__cause__).__name__

    def with_infinite(frame):
        scores = np.array(rescore(frame), dtype=np.float64)
        scores[:1] = np.inf
        return scores

    with pytest.raises(AuditInputError, match=r"^pairwise rows: \d+ scores are NaN or infinite$"):
        pairwise_spark_rows(spark.createDataFrame(_rows(200)), with_infinite, "test", GROUPS, partitions=2)
    with pytest.raises(AuditInputError, match="no query has both"):
        pairwise_spark_rows(spark.createDataFrame(_rows(200).assign(n_neg=0.0)), rescore, "test", GROUPS, partitions=2)


def test_the_pipeline_computes_pairwise_on_the_executors_when_its_rows_are_on_spark(spark):
    df = _rows(1500, seed=8)
    output = ScoredOutput("production", "logged score", "logged_score", rescore)
    in_memory = EvaluationData(score_counts=None, item_counts=None, query_rows=df, queries_in_window=120)
    on_spark = EvaluationData(score_counts=None, item_counts=None, query_rows=None, queries_in_window=120,
                              spark_query_rows=spark.createDataFrame(df))
    want, want_note, want_used = pairwise_for(output, in_memory, GROUPS, 0.95)
    got, note, used = pairwise_for(output, on_spark, GROUPS, 0.95)
    assert (note, used) == (want_note, want_used) and used == df["query_id"].nunique()
    assert (got.matrix["variance_estimand"] == "two_way").all()
    np.testing.assert_allclose(got.gaps[["gap", "se", "df", "n_items"]].to_numpy(float),
                               want.gaps[["gap", "se", "df", "n_items"]].to_numpy(float), rtol=1e-12)
