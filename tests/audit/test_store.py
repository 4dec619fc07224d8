"""audit_store.write_audit on a warehouse written by an older version: the new columns are added, not refused."""
from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd

from fair_pipeline.audit.store import SCHEMAS, write_audit
from fair_pipeline.platform.warehouse import table_columns


def test_a_table_without_the_training_window_columns_gains_them():
    old = [(c, t) for c, t in SCHEMAS["fairness_audit_outputs"] if c != "trained_from"]
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA marts")
        con.execute("CREATE TABLE marts.fairness_audit_outputs (" + ", ".join(f'"{c}" {t}' for c, t in old) + ")")
        rows = pd.DataFrame({"scored_output": ["eo_weighted"], "status": ["audited"], "held_out": [True],
                             "trained_from": [dt.date(2026, 1, 1)], "trained_through": [dt.date(2026, 1, 6)]})
        day = dt.date(2026, 1, 7)
        written = write_audit(con, "relevance", day, day, {"fairness_audit_outputs": rows})
        assert written["fairness_audit_outputs"] == 1
        assert "trained_from" in table_columns(con, "marts", "fairness_audit_outputs")
        stored = con.execute("SELECT trained_from, trained_through, window_start FROM marts.fairness_audit_outputs").fetchall()
        assert stored == [(dt.date(2026, 1, 1), dt.date(2026, 1, 6), day)]
