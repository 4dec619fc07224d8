"""The interactive elicitation session: display, DuckDB persistence, resume and replay."""
from __future__ import annotations

import argparse
import io
import json
import re

import duckdb
import numpy as np
import pytest

from fair_pipeline.commands.elicit import EXIT_OK, EXIT_PAUSED, add_arguments
from fair_pipeline.commands.elicit import run as run_elicit
from fair_pipeline.selection.elicitation import FairQuadraticMetric
from fair_pipeline.selection.session import format_comparison

TRUTH = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.array([[1.2, 0.3], [0.3, 0.8]]) * 2 / np.linalg.norm([[1.2, 0.3], [0.3, 0.8]])], 0.45)


class ScriptedPerson:
    """A stdin that reads the last question printed to ``screen`` and answers it truthfully for
    ``metric``; after ``stop_after`` answers it behaves like a closed terminal (end of input)."""

    def __init__(self, screen: io.StringIO, metric: FairQuadraticMetric, n_groups: int, stop_after: int | None = None):
        self.screen, self.metric, self.m = screen, metric, n_groups
        self.stop_after, self.answers = stop_after, 0

    def readline(self) -> str:
        if self.stop_after is not None and self.answers >= self.stop_after:
            return ""
        lines = self.screen.getvalue().splitlines()
        start = max(i for i, line in enumerate(lines) if "Question " in line)  # input is not echoed
        rows = [[float(x) for x in line.split()[-4:]] for line in lines[start + 3:start + 3 + self.m]]  # k = 2
        left, right = np.array([r[:2] for r in rows]), np.array([r[2:] for r in rows])
        self.answers += 1
        return "A\n" if self.metric(left) < self.metric(right) else "B\n"


def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_comparison_shows_group_and_overall_rates_side_by_side():
    left = np.array([[0.62, 0.55], [0.48, 0.51]])
    right = np.array([[0.50, 0.50], [0.50, 0.50]])
    text = format_comparison(4, left, right, ["women", "men"], np.array([[0.25, 0.5], [0.75, 0.5]]))
    lines = text.splitlines()
    assert lines[0] == "Question 5: which model do you prefer?"
    assert "Model A" in lines[1] and "Model B" in lines[1]
    assert lines[2].split() == ["group", "TPR", "TNR", "TPR", "TNR"]
    assert lines[3].split() == ["women", "0.6200", "0.5500", "0.5000", "0.5000"]
    # overall TPR = 0.25 * 0.62 + 0.75 * 0.48 = 0.515, TNR = 0.5 * 0.55 + 0.5 * 0.51 = 0.530
    assert lines[5].split() == ["overall", "0.5150", "0.5300", "0.5000", "0.5000"]


def _answers(db, session="s1"):
    con = duckdb.connect(str(db))
    con.execute(f'USE "{con.execute("SELECT current_database()").fetchone()[0]}".elicitation')
    rows = con.execute("SELECT query_index, r1, r2, r1_shown_as, r1_preferred, answered_at FROM answers "
                       "WHERE session_id = ? ORDER BY query_index", [session]).fetchall()
    status, result = con.execute("SELECT status, result_json FROM sessions WHERE session_id = ?",
                                 [session]).fetchone()
    con.close()
    return rows, status, result


def test_interrupted_session_resumes_where_it_stopped_and_replays(tmp_path):
    def argv(db):
        return ["--db", str(db), "--session", "s1", "--groups", "2", "--group-labels", "women,men",
                "--tolerance", "0.02", "--inner-radius", "0.08"]

    # reference: one sitting
    whole = io.StringIO()
    assert run_elicit(parse(argv(tmp_path / "whole.duckdb")), stdin=ScriptedPerson(whole, TRUTH, 2), stdout=whole) == EXIT_OK
    ref_rows, ref_status, ref_result = _answers(tmp_path / "whole.duckdb")
    assert ref_status == "completed" and len(ref_rows) > 40

    # the same person, interrupted after 25 answers (terminal closed), then resumed
    db = tmp_path / "split.duckdb"
    screen = io.StringIO()
    assert run_elicit(parse(argv(db)), stdin=ScriptedPerson(screen, TRUTH, 2, stop_after=25), stdout=screen) == EXIT_PAUSED
    assert "paused after 25 answers" in screen.getvalue()
    rows, status, _ = _answers(db)
    assert len(rows) == 25 and status == "in_progress"

    screen2 = io.StringIO()
    assert run_elicit(parse(argv(db)), stdin=ScriptedPerson(screen2, TRUTH, 2), stdout=screen2) == EXIT_OK
    out = screen2.getvalue()
    assert "Resuming session s1 (25 answers stored)" in out
    assert "Question 26:" in out and "Question 25:" not in out  # nothing asked twice
    rows, status, result = _answers(db)
    assert status == "completed" and result == ref_result
    assert [r[:5] for r in rows] == [r[:5] for r in ref_rows]  # same questions, same screens, same answers
    assert all(r[5] is not None for r in rows)  # every answer has its timestamp
    n_swapped = sum(r[3] == "B" for r in rows)
    assert 0.25 * len(rows) < n_swapped < 0.75 * len(rows)  # which profile is "Model A" is randomised

    # the person answered from 4-decimal screens: the metric is still close to theirs
    elicited = json.loads(result)
    assert abs(elicited["lam"] - TRUTH.lam) < 0.02
    assert np.linalg.norm(np.array(elicited["a"]) - TRUTH.a) < 0.02

    # replay recomputes the metric from the stored answers without reading any input
    screen3 = io.StringIO()
    code = run_elicit(parse(["--db", str(db), "--session", "s1", "--replay"]), stdin=io.StringIO(""), stdout=screen3)
    assert code == EXIT_OK and f"lambda = {elicited['lam']:.3f}" in screen3.getvalue()
    assert "Question" not in screen3.getvalue()


def test_quit_and_bad_input_and_incomplete_replay(tmp_path):
    db = tmp_path / "e.duckdb"
    screen = io.StringIO()
    code = run_elicit(parse(["--db", str(db), "--session", "s2"]), stdin=io.StringIO("maybe\nA\nq\n"), stdout=screen)
    assert code == EXIT_PAUSED
    assert "please type A or B, not 'maybe'" in screen.getvalue()
    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(db), "--session", "s2", "--replay"]), stdout=screen) == EXIT_PAUSED
    assert "incomplete (1 answers)" in screen.getvalue()
    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(db), "--list"]), stdout=screen) == EXIT_OK
    assert screen.getvalue().startswith("s2\tin_progress")


def test_bad_session_settings_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="--group-labels names 3 groups but --groups is 2"):
        run_elicit(parse(["--db", str(tmp_path / "x.duckdb"), "--group-labels", "a,b,c"]), stdout=io.StringIO())
    with pytest.raises(ValueError, match="must sum to 1"):
        run_elicit(parse(["--db", str(tmp_path / "x.duckdb"), "--group-weights", "[[0.5, 0.5], [0.2, 0.5]]"]),
                   stdout=io.StringIO())


def test_ctrl_c_pauses_the_session(tmp_path):
    class CtrlC:
        def readline(self):
            raise KeyboardInterrupt

    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(tmp_path / "c.duckdb"), "--session", "s3"]), stdin=CtrlC(), stdout=screen) == EXIT_PAUSED
    assert "Session s3 paused after 0 answers" in screen.getvalue()


def test_the_default_database_works_for_list_sessions_and_the_recorded_oracle(fp_home):
    # $FAIR_PIPELINE_HOME/elicitation.duckdb: its catalog is named like its schema, which duckdb 2 calls ambiguous
    # when a statement writes `elicitation.sessions`.
    from fair_pipeline.platform import settings
    from fair_pipeline.selection.metric_oracle import elicit_recorded

    assert settings.default_elicitation_db() == fp_home / "elicitation.duckdb"
    empty = io.StringIO()
    assert run_elicit(parse(["--list"]), stdout=empty) == EXIT_OK
    assert f"no elicitation sessions in {fp_home / 'elicitation.duckdb'}" in empty.getvalue()

    screen = io.StringIO()
    argv = ["--session", "s1", "--tolerance", "0.05", "--inner-radius", "0.08"]
    assert run_elicit(parse(argv), stdin=ScriptedPerson(screen, TRUTH, 2), stdout=screen) == EXIT_OK
    listing = io.StringIO()
    assert run_elicit(parse(["--list"]), stdout=listing) == EXIT_OK
    assert listing.getvalue().startswith("s1\tcompleted\t")
    result = elicit_recorded(settings.default_elicitation_db(), "s1")  # what `oracle: recorded` selection reads
    assert result.metric.lam == pytest.approx(json.loads(_answers(fp_home / "elicitation.duckdb")[2])["lam"])


@pytest.mark.parametrize("option, value, message", [("--radius", "0.9", "radius must be in (0, 1/n_classes]"),
                                                    ("--radius", "-1", "radius must be in"),
                                                    ("--tolerance", "0", "tolerance must be a finite number > 0"),
                                                    ("--tolerance", "nan", "tolerance must be a finite number > 0"),
                                                    ("--inner-radius", "0.5", "need 0 < inner_radius < radius")])
def test_bad_search_settings_are_refused_before_the_session_is_stored(tmp_path, option, value, message):
    db = tmp_path / "e.duckdb"
    with pytest.raises(ValueError, match=re.escape(message)):
        run_elicit(parse(["--db", str(db), "--session", "s1", option, value]), stdin=io.StringIO(""), stdout=io.StringIO())
    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(db), "--list"]), stdout=screen) == EXIT_OK
    assert "no elicitation sessions" in screen.getvalue()


def test_a_folder_or_a_foreign_file_as_db_is_one_clear_line(tmp_path):
    from fair_pipeline.commands.elicit import EXIT_ERROR

    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(tmp_path), "--list"]), stdout=screen) == EXIT_ERROR
    assert screen.getvalue().splitlines() == [f"--db {tmp_path} is a folder; give a DuckDB file "
                                              f"(e.g. {tmp_path / 'elicitation.duckdb'})"]
    (tmp_path / "notes.txt").write_text("not a database")
    screen = io.StringIO()
    assert run_elicit(parse(["--db", str(tmp_path / "notes.txt"), "--list"]), stdout=screen) == EXIT_ERROR
    assert screen.getvalue().startswith(f"cannot open the elicitation store {tmp_path / 'notes.txt'}:")
