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


def test_comparison_tables_written_before_verdicts_gain_the_equivalence_columns_and_stay_readable():
    from fair_pipeline.audit.store import EQUIVALENCE

    new = [c for c, _ in EQUIVALENCE]
    old = [(c, t) for c, t in SCHEMAS["fairness_audit_pairs"] if c not in new]
    day = dt.date(2026, 1, 7)
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA marts")
        con.execute("CREATE TABLE marts.fairness_audit_pairs (" + ", ".join(f'"{c}" {t}' for c, t in old) + ")")
        con.execute("INSERT INTO marts.fairness_audit_pairs (label_source, window_start, window_end, scored_output, "
                    "group_a, group_b, cutoff, diff) VALUES ('relevance', DATE '2026-01-01', DATE '2026-01-01', "
                    "'production', '0', '1', 0.1, 0.004)")
        rows = pd.DataFrame({"scored_output": ["production"], "group_a": ["0"], "group_b": ["1"], "cutoff": [0.1],
                             "diff": [0.004], "diff_normalized": [0.04], "effect": [0.04], "margin": [0.02],
                             "p_tost": [0.9], "verdict": ["gap larger than δ (significant)"]})
        write_audit(con, "relevance", day, day, {"fairness_audit_pairs": rows})
        assert set(new) <= set(table_columns(con, "marts", "fairness_audit_pairs"))
        stored = con.execute("SELECT window_start, verdict, margin FROM marts.fairness_audit_pairs ORDER BY window_start").fetchall()
        assert stored == [(dt.date(2026, 1, 1), None, None), (day, "gap larger than δ (significant)", 0.02)]
