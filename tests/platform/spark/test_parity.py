"""Parity: the dbt_like_sql models built on Spark equal DuckDB's, table by table, row for row, and pass their
schema files' tests (columns, not_null, unique keys) on Spark as tests/platform/test_sql_schemas.py checks on DuckDB.

Both engines start from the same landing files: ingestion validates them in DuckDB (raw.* and raw.quarantine,
including rejected rows), the raw layer is copied to the Spark engine, and every model is built on each engine
by the same `build_model` from the same DuckDB-dialect SQL."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import sql as audit_sql
from fair_pipeline.audit.stats import StreamingAudit, audit_aggregates
from fair_pipeline.audit.stats.blocks import SortedCellBlocks
from fair_pipeline.eo.sql import read_click_counts, read_weighted_sums
from fair_pipeline.eo.transform import fit_from_click_counts, fit_from_weighted_sums
from fair_pipeline.platform import sql_models, warehouse
from fair_pipeline.platform.engines import DuckDBEngine, build_models
from fair_pipeline.platform.engines.spark_engine import SparkEngine
from fair_pipeline.platform.engines.transfer import RAW_PARTITIONED, RAW_UNPARTITIONED, copy_raw_layer
from fair_pipeline.platform.sql_schemas import check_columns, load_schema, schema_violations
from fair_pipeline.platform.windows import PartitionWindow
from tests.platform import small_warehouse


@pytest.fixture(scope="module")
def engines(spark, tmp_path_factory):
    home = tmp_path_factory.mktemp("parity")
    landing = small_warehouse.simulate_landing(home / "landing")
    small_warehouse.load_raw(home / "warehouse.duckdb", landing)
    with warehouse.session(home / "warehouse.duckdb") as con:
        duck = DuckDBEngine(con)
        spark_engine = SparkEngine(spark, home / "spark_warehouse")
        copy_raw_layer(duck, spark_engine, small_warehouse.PARTITIONS)
        built = {name: build_models(engine, small_warehouse.PARTITIONS)
                 for name, engine in (("duckdb", duck), ("spark", spark_engine))}
        yield duck, spark_engine, built, landing


def _normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """Comparable values: dates and timestamps as ISO text, numbers as float, NULL/NaN as None; rows sorted."""
    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_datetime64_any_dtype(values) or values.map(lambda v: hasattr(v, "isoformat")).any():
            out[column] = values.map(lambda v: None if v is None or pd.isna(v) else pd.Timestamp(v).isoformat())
        elif pd.api.types.is_bool_dtype(values) or values.map(lambda v: isinstance(v, (bool, np.bool_))).any():
            out[column] = values.map(lambda v: None if v is None or pd.isna(v) else bool(v))
        elif pd.api.types.is_numeric_dtype(values):
            out[column] = values.astype(float)
        else:
            out[column] = values.map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    return out.sort_values(list(out.columns), na_position="first", key=lambda s: s.map(repr)).reset_index(drop=True)


def _assert_same_rows(name: str, duck: pd.DataFrame, spark: pd.DataFrame) -> None:
    assert list(duck.columns) == list(spark.columns), f"{name}: columns differ"
    assert len(duck) == len(spark), f"{name}: {len(duck)} rows on DuckDB, {len(spark)} on Spark"
    left, right = _normalized(duck), _normalized(spark)
    for column in left.columns:
        a, b = left[column], right[column]
        if a.dtype == float:
            np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=0, atol=1e-9, equal_nan=True,
                                       err_msg=f"{name}.{column}")
        else:
            mismatch = [(x, y) for x, y in zip(a, b) if x != y]
            assert not mismatch, f"{name}.{column}: {len(mismatch)} values differ, e.g. {mismatch[:3]}"


def test_every_model_has_the_same_row_counts(engines):
    _, _, built, _ = engines
    assert built["spark"] == built["duckdb"]
    assert built["duckdb"]["stg_quarantine"] > 0 and min(built["duckdb"].values()) > 0


@pytest.mark.parametrize("model", sorted(sql_models.discover_models()))
def test_every_model_equals_duckdb_row_for_row(engines, model):
    duck, spark_engine, _, _ = engines
    table = sql_models.discover_models()[model].key
    sql = f"SELECT * FROM {table[0]}.{table[1]}"
    _assert_same_rows(model, duck.query_df(sql), spark_engine.query_df(sql))


@pytest.mark.parametrize("model", sorted(sql_models.discover_models()))
def test_every_model_on_spark_has_its_schema_columns_and_passes_its_schema_tests(engines, model):
    _, spark_engine, _, _ = engines
    sql_model = sql_models.discover_models()[model]
    schema = load_schema(sql_model)
    columns = list(spark_engine.query_df(f"SELECT * FROM {sql_model.table} LIMIT 0").columns)
    assert check_columns(schema, columns) == []
    violations = schema_violations(spark_engine, sql_model, schema)
    assert violations and set(violations.values()) == {0}, violations


@pytest.mark.parametrize("table", RAW_PARTITIONED + RAW_UNPARTITIONED)
def test_the_copied_raw_layer_equals_duckdb(engines, table):
    duck, spark_engine, _, _ = engines
    where = " WHERE partition_date IS NOT NULL" if table == ("raw", "quarantine") else ""
    sql = f"SELECT * FROM {table[0]}.{table[1]}{where}"
    _assert_same_rows(".".join(table), duck.query_df(sql), spark_engine.query_df(sql))


def _streamed_audit(engine, source: audit_sql.LabelSource) -> object:
    """The exact audit from aggregates only: group totals, then GROUP BY score (x group x label) streamed to the
    driver in descending score order into the sweep, a batch at a time (a score may straddle two batches)."""
    rows = f"SELECT * FROM ({source.rows_sql}) WHERE label IS NOT NULL"
    totals = engine.query_df(
        f"SELECT grp, CAST(sum(label) AS BIGINT) AS n_pos, CAST(count(*) - sum(label) AS BIGINT) AS n_neg FROM ({rows}) "
        "GROUP BY grp ORDER BY grp", source.params)
    groups = totals["grp"].tolist()
    audit = StreamingAudit(groups, totals["n_pos"], totals["n_neg"])
    blocks, code = SortedCellBlocks(2 * len(groups)), {g: i for i, g in enumerate(groups)}

    def feed(done):
        if done is not None:
            scores, counts = done
            audit.update_columns(scores, counts[1::2], counts[0::2])

    stream = engine.stream_batches(
        f"SELECT score, grp, label, count(*) AS n FROM ({rows}) GROUP BY score, grp, label ORDER BY score DESC",
        source.params, batch_rows=97)
    for batch in stream:
        cells = np.array([code[g] for g in batch.column("grp").to_pylist()]) * 2 + batch.column("label").to_numpy()
        feed(blocks.push(batch.column("score").to_numpy(), cells, batch.column("n").to_numpy()))
    feed(blocks.finish())
    return audit.report()


def _assert_reports_equal(left, right, atol: float) -> None:
    for name in ("groups", "pairs", "overall"):
        a, b = getattr(left, name), getattr(right, name)
        assert list(a.columns) == list(b.columns) and len(a) == len(b) > 0, name
        for column in a.columns:
            if pd.api.types.is_numeric_dtype(a[column]) and not pd.api.types.is_bool_dtype(a[column]):
                np.testing.assert_allclose(b[column].to_numpy(float), a[column].to_numpy(float), rtol=0, atol=atol,
                                           equal_nan=True, err_msg=f"{name}.{column}")
            else:
                assert a[column].tolist() == b[column].tolist(), f"{name}.{column}"


def test_exact_partial_aucs_on_spark_from_streamed_aggregates_match_duckdb(engines):
    duck, spark_engine, _, landing = engines
    days = tuple(dt.date.fromisoformat(day) for day in small_warehouse.PARTITIONS)
    source = audit_sql.label_source("relevance", landing, PartitionWindow(days[0], days[-1], days), [])
    reference = audit_aggregates(audit_sql.score_counts(duck.con, source))  # the audit stage's DuckDB path
    on_duckdb, on_spark = _streamed_audit(duck, source), _streamed_audit(spark_engine, source)
    assert reference.groups["n_pos"].sum() > 0 and len(reference.groups["group"].unique()) >= 2
    _assert_reports_equal(reference, on_duckdb, atol=1e-12)
    _assert_reports_equal(on_duckdb, on_spark, atol=1e-12)


def test_eo_weighted_sums_and_fits_on_spark_equal_duckdb(engines):
    """The EO window's weights applied by the engine (one row per group and score value) give the same table and the
    same fits on Spark as on DuckDB, and as the per-position counts weighted in numpy."""
    duck, spark_engine, _, _ = engines
    days = [dt.date.fromisoformat(day) for day in small_warehouse.PARTITIONS]
    curve = pd.DataFrame({"position": np.arange(1, small_warehouse.CONFIG.slots + 1)})
    curve["weight"] = 1.0 / (1.0 + 0.3 * (curve["position"] - 1))
    tables = {name: read_weighted_sums(engine, days[0], days[-1], curve)
              for name, engine in (("duckdb", duck), ("spark", spark_engine))}
    assert len(tables["duckdb"]) > 100
    _assert_same_rows("eo weighted sums", tables["duckdb"], tables["spark"])
    params = dict(score_bin_width=float(sql_models.SQL_PARAMETERS["eo_score_bin_width"]), missing_group="exclude")
    fits = {name: fit_from_weighted_sums(table, **params) for name, table in tables.items()}
    per_position = fit_from_click_counts(read_click_counts(duck, days[0], days[-1]), curve, **params)
    for fit in (fits["spark"], per_position):
        assert fit.groups_ == fits["duckdb"].groups_ and fit.n_positives_ == fits["duckdb"].n_positives_
        np.testing.assert_allclose(fit.reference_quantiles_, fits["duckdb"].reference_quantiles_, rtol=0, atol=1e-12)
        for group in fit.groups_:
            np.testing.assert_allclose(fit.group_quantiles_[group], fits["duckdb"].group_quantiles_[group], rtol=0,
                                       atol=1e-12)
            assert fit.n_effective_[group] == pytest.approx(fits["duckdb"].n_effective_[group], rel=1e-12)
