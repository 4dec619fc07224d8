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
from fair_pipeline.selection.elicitation import FairQuadraticMetric, metric_from_dict, sample_sphere_profiles
from fair_pipeline.selection.elicitation import exposure_question
from fair_pipeline.selection.session import format_comparison

TRUTH = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.array([[1.2, 0.3], [0.3, 0.8]]) * 2 / np.linalg.norm([[1.2, 0.3], [0.3, 0.8]])], 0.45)


def read_question(screen: io.StringIO, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The two profiles of the last question printed, read from its percentages (k = 2)."""
    lines = screen.getvalue().splitlines()
    start = max(i for i, line in enumerate(lines) if "Question " in line)  # input is not echoed
    rows = [[float(x[:-1]) / 100 for x in line.split() if x.endswith("%")] for line in lines[start + 3:start + 3 + n_groups]]
    return np.array([r[:2] for r in rows]), np.array([r[2:] for r in rows])


class ScriptedPerson:
    """A stdin that reads the last question printed to ``screen`` and answers it for ``metric``: S below a
    2% relative cost difference if ``says_same``, else the cheaper one; after ``stop_after`` answers it
    behaves like a closed terminal (end of input)."""

    def __init__(self, screen: io.StringIO, metric: FairQuadraticMetric, n_groups: int, stop_after: int | None = None,
                 says_same: bool = True, exposure_points: str = "5"):
        self.screen, self.metric, self.m = screen, metric, n_groups
        self.stop_after, self.answers, self.says_same = stop_after, 0, says_same
        self.exposure_points = exposure_points

    def readline(self) -> str:
        if self.stop_after is not None and self.answers >= self.stop_after:
            return ""
        if self.screen.getvalue().endswith(exposure_question.PROMPT):
            return self.exposure_points + "\n"
        left, right = read_question(self.screen, self.m)
        self.answers += 1
        a, b = self.metric(left), self.metric(right)
        if self.says_same and abs(a - b) < 0.02 * max(a, b):
            return "S\n"
        return "A\n" if a < b else "B\n"


def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_comparison_shows_percentages_and_marks_the_largest_differences():
    left = np.array([[0.62, 0.55], [0.48, 0.51]])
    right = np.array([[0.50, 0.50], [0.50, 0.50]])
    text = format_comparison(4, left, right, ["women", "men"], np.array([[0.25, 0.5], [0.75, 0.5]]))
    lines = text.splitlines()
    assert lines[0] == "Question 5: which model do you prefer?"
    assert "Model A" in lines[1] and "Model B" in lines[1] and "B - A (points)" in lines[1]
    assert lines[2].split() == ["group", "TPR", "TNR", "TPR", "TNR", "TPR", "TNR"]
    assert lines[3].split() == ["women", "62%", "55%", "50%", "50%", "-12", "<", "-5"]
    assert lines[4].split() == ["men", "48%", "51%", "50%", "50%", "+2", "-1"]
    # overall TPR = 0.25 * 0.62 + 0.75 * 0.48 = 0.515, TNR = 0.5 * 0.55 + 0.5 * 0.51 = 0.530
    assert lines[5].split() == ["overall", "51.5%", "53%", "50%", "50%", "-1.5", "-3"]


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
        return ["--db", str(db), "--session", "s1", "--groups", "2", "--group-labels", "women,men"]

    # reference: one sitting
    whole = io.StringIO()
    assert run_elicit(parse(argv(tmp_path / "whole.duckdb")), stdin=ScriptedPerson(whole, TRUTH, 2), stdout=whole) == EXIT_OK
    ref_rows, ref_status, ref_result = _answers(tmp_path / "whole.duckdb")
    assert ref_status == "completed" and 10 <= len(ref_rows) <= 40

    # the same person, interrupted after 6 answers (terminal closed), then resumed
    db = tmp_path / "split.duckdb"
    screen = io.StringIO()
    assert run_elicit(parse(argv(db)), stdin=ScriptedPerson(screen, TRUTH, 2, stop_after=6), stdout=screen) == EXIT_PAUSED
    assert "paused after 6 answers" in screen.getvalue()
    rows, status, _ = _answers(db)
    assert len(rows) == 6 and status == "in_progress"

    screen2 = io.StringIO()
    assert run_elicit(parse(argv(db)), stdin=ScriptedPerson(screen2, TRUTH, 2), stdout=screen2) == EXIT_OK
    out = screen2.getvalue()
    assert "Resuming session s1 (6 answers stored)" in out
    assert "Question 7:" in out and "Question 6:" not in out  # nothing asked twice
    rows, status, result = _answers(db)
    assert status == "completed" and result == ref_result
    assert [r[:5] for r in rows] == [r[:5] for r in ref_rows]  # same questions, same screens, same answers
    assert all(r[5] is not None for r in rows)  # every answer has its timestamp
    n_swapped = sum(r[3] == "B" for r in rows)
    assert 0.2 * len(rows) < n_swapped < 0.8 * len(rows)  # which profile is "Model A" is randomised
    assert any(r[4] is None for r in rows)  # "about the same" is stored as such

    # the person answered from whole-percent screens: the metric orders pairs like theirs
    elicited = json.loads(result)
    metric = metric_from_dict(elicited)
    rng = np.random.default_rng(3)
    r1, r2 = sample_sphere_profiles(rng, 2000, 2), sample_sphere_profiles(rng, 2000, 2)
    clear = np.abs(TRUTH(r1) - TRUTH(r2)) >= 0.02 * np.maximum(TRUTH(r1), TRUTH(r2))
    assert np.mean(np.sign(TRUTH(r1) - TRUTH(r2))[clear] == np.sign(metric(r1) - metric(r2))[clear]) >= 0.9

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
    assert "please type A, B or S (about the same), not 'maybe'" in screen.getvalue()
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
    argv = ["--session", "s1"]
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
