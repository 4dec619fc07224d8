"""Warehouse connections cap DuckDB's memory and spill to a temp directory: default, env, resource, bad values."""
from __future__ import annotations

import duckdb
import pytest

from fair_pipeline.platform import settings, warehouse
from fair_pipeline.platform.resources import DuckDBWarehouse


def _setting(con, name: str) -> str:
    return con.execute("SELECT current_setting($name)", {"name": name}).fetchone()[0]


def _as_duckdb_reports(size: str) -> str:
    """How DuckDB reports a memory_limit once set (e.g. '1GB' -> '953.6 MiB')."""
    con = duckdb.connect()
    con.execute("SET memory_limit = $size", {"size": size})
    return _setting(con, "memory_limit")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    monkeypatch.delenv(settings.DUCKDB_MEMORY_LIMIT_ENV, raising=False)
    monkeypatch.delenv(settings.DUCKDB_TEMP_DIR_ENV, raising=False)
    return tmp_path


def test_default_is_512mb_spilling_under_the_home(home):
    with warehouse.session(home / "warehouse.duckdb") as con:
        assert _setting(con, "memory_limit") == _as_duckdb_reports("384MB")
        assert _setting(con, "temp_directory") == str(home / "duckdb_tmp")
    assert (home / "duckdb_tmp").is_dir()


def test_env_and_resource_override(home, monkeypatch):
    monkeypatch.setenv(settings.DUCKDB_MEMORY_LIMIT_ENV, "256MB")
    monkeypatch.setenv(settings.DUCKDB_TEMP_DIR_ENV, str(home / "spill"))
    with warehouse.session(home / "warehouse.duckdb", read_only=False) as con:
        assert (_setting(con, "memory_limit"), _setting(con, "temp_directory")) == (
            _as_duckdb_reports("256MB"), str(home / "spill"))
    resource = DuckDBWarehouse(path=str(home / "warehouse.duckdb"), memory_limit="300MB",
                               temp_directory=str(home / "other"))
    with resource.connect(read_only=True) as con:
        assert (_setting(con, "memory_limit"), _setting(con, "temp_directory")) == (
            _as_duckdb_reports("300MB"), str(home / "other"))


def test_a_query_larger_than_the_limit_spills_and_is_exact(home):
    """A GROUP BY over 2e6 distinct keys needs more than 40MB of hash table: it completes by spilling."""
    with warehouse.session(home / "warehouse.duckdb", memory_limit="40MB") as con:
        con.execute("SET threads = 1")
        groups, total = con.execute(
            "SELECT count(*), sum(n) FROM (SELECT r % 2000000 AS k, count(*) AS n FROM range(4000000) t(r) "
            "GROUP BY k ORDER BY k)").fetchone()
    assert (groups, total) == (2_000_000, 4_000_000)


def test_bad_limit_names_the_setting(home, monkeypatch):
    monkeypatch.setenv(settings.DUCKDB_MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match=r"memory_limit 'lots' \(env FAIR_PIPELINE_DUCKDB_MEMORY_LIMIT"):
        warehouse.connect(home / "warehouse.duckdb")
    monkeypatch.delenv(settings.DUCKDB_MEMORY_LIMIT_ENV)
    with warehouse.session(home / "warehouse.duckdb") as con:  # the failed connection was closed
        assert con.execute("SELECT 1").fetchone() == (1,)
