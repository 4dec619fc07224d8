"""The exposure question of `fair-pipeline elicit`: the weight mu priced in accuracy points, validated, stored with the
session, replayed, carried by the recorded oracle into model selection, and said in the report."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from fair_pipeline.commands.elicit import EXIT_OK, EXIT_PAUSED
from fair_pipeline.commands.elicit import run as run_elicit
from fair_pipeline.selection.elicitation import FairQuadraticMetric, metric_from_dict
from fair_pipeline.selection.elicitation import exposure_question as eq
from fair_pipeline.selection.exposure import exposure_disparity
from fair_pipeline.selection.metric_oracle import elicit_recorded
from fair_pipeline.selection.report import metric_table
from tests.selection.test_session import TRUTH, ScriptedPerson, parse


def test_the_weight_makes_the_four_fifths_gap_cost_as_much_as_the_stated_accuracy_points():
    for m, lam, points in ((2, 0.45, 5.0), (3, 0.2, 12.5), (4, 0.8, 1.0)):
        metric = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2)] * (m * (m - 1) // 2), lam)
        mu = eq.weight_from_points(metric, points)
        # the question's gap, through the same D model selection computes: one group at 0.8, the others at 1
        gap, _ = exposure_disparity(np.r_[math.log(0.8), np.zeros(m - 2)], np.zeros(m - 1))
        assert gap == pytest.approx(eq.reference_disparity(m))
        rates = np.full((m, 2), 0.7)
        lowered = rates - points / 100.0  # every TPR and TNR of every group, points lower
        assert mu * gap == pytest.approx(metric(lowered) - metric(rates), rel=1e-12)
    assert eq.weight_from_points(metric, 0.0) == 0.0
    only_disparities = FairQuadraticMetric.from_pairs([0.6, 0.8], [np.eye(2)], 1.0)
    assert eq.weight_from_points(only_disparities, 10.0) == 0.0
    assert "lambda = 1" in eq.question_text(only_disparities, ["a", "b"])


@pytest.mark.parametrize("text, expected", [("5", 5.0), (" 2.5 \n", 2.5), ("7,5", 7.5), ("3%", 3.0), ("", 0.0),
                                            ("0", 0.0), ("100", 100.0)])
def test_answers_are_read_as_points(text, expected):
    assert eq.parse_points(text) == expected


@pytest.mark.parametrize("text, message", [("lots", "type a number"), ("-1", "between 0 and 100"),
                                           ("101", "between 0 and 100"), ("nan", "between 0 and 100"),
                                           ("inf", "between 0 and 100")])
def test_bad_answers_name_what_is_expected(text, message):
    with pytest.raises(ValueError, match=message):
        eq.parse_points(text)


def _result(db, session):
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    con.execute(f'USE "{con.execute("SELECT current_database()").fetchone()[0]}".elicitation')
    row = con.execute("SELECT result_json, exposure_points, exposure_answered_at FROM sessions WHERE session_id = ?",
                      [session]).fetchone()
    con.close()
    return json.loads(row[0]) if row[0] else None, row[1], row[2]


def test_the_session_asks_after_the_comparisons_reasks_bad_input_pauses_and_resumes_at_the_question(tmp_path):
    db = tmp_path / "e.duckdb"
    argv = ["--db", str(db), "--session", "x1", "--group-labels", "Frauen «F»,мужчины"]
    # a person who answers the comparisons, then types nonsense, an out-of-range number and stops
    screen = io.StringIO()
    person = ScriptedPerson(screen, TRUTH, 2)
    answers = iter(["many\n", "150\n", "q\n"])
    person.exposure_points = None

    class Reader:
        def readline(self):
            if screen.getvalue().endswith(eq.PROMPT):
                return next(answers)
            return person.readline()

    assert run_elicit(parse(argv), stdin=Reader(), stdout=screen) == EXIT_PAUSED
    out = screen.getvalue()
    assert "four-fifths" in out and "Frauen «F», мужчины" in out
    assert "type a number of percentage points from 0 to 100, not 'many'" in out
    assert "points must lie between 0 and 100" in out
    assert _result(db, "x1") == (None, None, None)
    n_questions = out.count("which model do you prefer?")

    # resumed: no comparison is asked again, only the exposure question
    screen2 = io.StringIO()
    assert run_elicit(parse(argv), stdin=io.StringIO("12.5\n"), stdout=screen2) == EXIT_OK
    out2 = screen2.getvalue()
    assert "which model do you prefer?" not in out2 and out2.count(eq.PROMPT) == 1
    result, points, answered_at = _result(db, "x1")
    assert points == 12.5 and answered_at is not None
    metric = metric_from_dict(result)
    assert metric.exposure_weight == pytest.approx(eq.weight_from_points(metric, 12.5))
    assert "12.5 points of accuracy" in metric.exposure_weight_source
    assert f"exposure weight mu = {metric.exposure_weight:.4g}" in out2
    assert n_questions >= 10

    # replay and the recorded oracle carry the stored answer; --exposure-points does not change it
    screen3 = io.StringIO()
    assert run_elicit(parse(argv + ["--replay", "--exposure-points", "3"]), stdin=io.StringIO(""),
                      stdout=screen3) == EXIT_OK
    assert "--exposure-points 3 ignored: session x1 answered 12.5" in screen3.getvalue()
    assert metric_from_dict(_result(db, "x1")[0]).exposure_weight == pytest.approx(metric.exposure_weight)
    recorded = elicit_recorded(db, "x1").metric
    assert recorded.exposure_weight == pytest.approx(metric.exposure_weight)
    table = metric_table(recorded, None, ["Frauen «F»", "мужчины"], "recorded", recorded.n_queries)
    row = table[table["parameter"].str.startswith("exposure weight")].iloc[0]
    assert row["elicited"] == pytest.approx(metric.exposure_weight) and "12.5 points of accuracy" in row["parameter"]


def test_the_answer_can_be_given_on_the_command_line_and_bad_values_are_refused(tmp_path, capsys):
    db = tmp_path / "e.duckdb"
    screen = io.StringIO()
    argv = ["--db", str(db), "--session", "x2", "--exposure-points", "0"]
    assert run_elicit(parse(argv), stdin=ScriptedPerson(screen, TRUTH, 2), stdout=screen) == EXIT_OK
    assert eq.PROMPT not in screen.getvalue()
    result, points, _ = _result(db, "x2")
    assert points == 0.0 and "exposure_weight" not in result  # 0: ranked by the rates
    assert "0 points" in result["exposure_weight_source"]
    for bad in ("-2", "abc"):
        with pytest.raises(SystemExit):
            parse(["--exposure-points", bad])
        assert "--exposure-points" in capsys.readouterr().err


def test_a_session_replayed_without_an_answer_weighs_exposure_zero_and_says_so(tmp_path):
    db = tmp_path / "e.duckdb"
    screen = io.StringIO()
    argv = ["--db", str(db), "--session", "x3"]
    assert run_elicit(parse(argv), stdin=ScriptedPerson(screen, TRUTH, 2, exposure_points="q"),
                      stdout=screen) == EXIT_PAUSED  # comparisons done, exposure question not answered
    replay = io.StringIO()
    assert run_elicit(parse(argv + ["--replay"]), stdin=io.StringIO(""), stdout=replay) == EXIT_OK
    metric = metric_from_dict(_result(db, "x3")[0])
    assert metric.exposure_weight == 0.0 and metric.exposure_weight_source.startswith("not asked")


def test_the_assets_weight_overrides_the_sessions_and_says_so():
    from fair_pipeline.selection.assets import STATED_WEIGHT, ElicitedMetricConfig, elicit

    unset = elicit(ElicitedMetricConfig(group_labels=["a", "b"]), warehouse=None).metric
    assert unset.exposure_weight == 0.0 and unset.exposure_weight_source == ""
    stated = elicit(ElicitedMetricConfig(group_labels=["a", "b"], exposure_weight=2.0), warehouse=None).metric
    assert stated.exposure_weight == 2.0 and stated.exposure_weight_source == STATED_WEIGHT
    assert stated.lam == unset.lam  # the rates' part is the oracle's either way
    table = metric_table(stated, None, ["a", "b"], "simulated", stated.n_queries)
    assert table["parameter"].str.contains("stated in the elicited_metric asset's config").any()
