"""`fair-pipeline elicit --partition D`: a person who reads the screen picks among the day's candidates (their
per-group rates from marts.model_ranking), and the session stops once their order is settled."""
from __future__ import annotations

import argparse
import datetime as dt
import io
import re

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.commands.elicit import EXIT_OK, add_arguments, run
from fair_pipeline.platform import settings
from fair_pipeline.selection import ScriptedAnswerer
from fair_pipeline.selection.elicitation import exposure_question, metric_to_dict, random_fair_metric, relative_difference
from fair_pipeline.selection.elicitation.adaptive import whole_percent_profiles
from fair_pipeline.selection.metric_oracle import elicit_recorded
from fair_pipeline.selection.session import SessionStore

LABELS = ('women "F"', "men+", "ノンバイナリー")  # labels are data: quotes, spaces, +, non-Latin
DAY = dt.date(2026, 3, 4)
NAMES = ["penalized λ=0.1", "eo α=0.5 <b>", "baseline 'raw'", "penalized λ=1", "eo α=1"]


class ScreenReader(io.StringIO):
    """stdin of a person who reads each question off the screen (written to `screen`) and answers by a hidden
    metric, as `ScriptedAnswerer` would: A, B or S (about the same)."""

    def __init__(self, screen: io.StringIO, person: ScriptedAnswerer, n_groups: int):
        super().__init__()
        self.screen, self.person, self.m = screen, person, n_groups

    def readline(self, *args) -> str:
        if self.screen.getvalue().endswith(exposure_question.PROMPT):
            return "0\n"  # exposure weighs nothing here: the candidates' order is the rates'
        block = self.screen.getvalue().rsplit("which model do you prefer?", 1)[1]
        rows = [line[len(label):] for label in LABELS for line in block.splitlines() if line.startswith(label)]
        rates = np.array([[float(t[:-1]) / 100 for t in row.split() if t.endswith("%")] for row in rows])
        answer = self.person(rates[:, :2], rates[:, 2:])
        return "S\n" if answer is None else ("A\n" if answer else "B\n")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p


def write_ranking(home, profiles: np.ndarray, day: dt.date = DAY, names=NAMES) -> None:
    rows = []
    for rank, (name, profile) in enumerate(zip(names, profiles), start=1):
        row = {"partition_date": day, "model": name, "rank": rank}
        for label, (tpr, tnr) in zip(LABELS, profile):
            row[f"tpr[{label}]"], row[f"tnr[{label}]"] = tpr, tnr
        rows.append(row)
    frame = pd.DataFrame(rows)
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS marts")
        con.register("ranking", frame)
        exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'model_ranking'").fetchone()[0]
        con.execute("INSERT INTO marts.model_ranking SELECT * FROM ranking" if exists
                    else "CREATE TABLE marts.model_ranking AS SELECT * FROM ranking")


def elicit(home, person, *options) -> tuple[int, str]:
    screen = io.StringIO()
    code = run(parser().parse_args(["--db", str(home / "elicitation.duckdb"), *options]),
               stdin=ScreenReader(screen, person, len(LABELS)), stdout=screen)
    return code, screen.getvalue()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path))
    return tmp_path


def candidates_and_truth():
    """Five whole-percent candidates (what the screen shows is exact) whose costs under the hidden metric differ
    clearly (>= 5% relative) pair by pair, so their order is there to be found."""
    rng = np.random.default_rng(5)
    truth = random_fair_metric(rng, 3, lam_range=(0.3, 0.7))
    while True:
        profiles = whole_percent_profiles(rng, 5, 3, 2, 0.2)
        cost = truth(profiles)
        i, j = np.triu_indices(5, 1)
        if np.abs(relative_difference(cost[i], cost[j])).min() >= 0.05:
            return profiles, truth


def printed_order(text: str) -> list[str]:
    block = text.split("Candidates by elicited cost (lower is better):\n", 1)[1]
    return [re.match(r"\s+\d+\. (.*?)\s+-?\d+\.\d{4}$", line).group(1) for line in block.splitlines()]


def test_candidates_stop_the_questions_earlier_in_the_hidden_metrics_order_and_replay_identically(home):
    profiles, truth = candidates_and_truth()
    write_ranking(home, profiles)
    write_ranking(home, profiles[:2] + 0.01, day=DAY - dt.timedelta(days=1), names=NAMES[:2])
    labels = ",".join(LABELS)
    code, general = elicit(home, ScriptedAnswerer(truth, seed=1), "--session", "general", "--groups", "3",
                           "--group-labels", labels)
    assert code == EXIT_OK
    code, picking = elicit(home, ScriptedAnswerer(truth, seed=1), "--session", "pick", "--partition", "latest",
                           "--group-labels", labels)
    assert code == EXIT_OK, picking
    assert f"Picking among the 5 candidates of partition {DAY}" in picking
    assert f"order of the 5 candidates of partition {DAY} is settled" in picking
    answers = lambda text: int(re.search(r"Elicited metric after (\d+) answers", text).group(1))  # noqa: E731
    assert answers(picking) < answers(general), (answers(picking), answers(general))
    assert printed_order(picking) == [NAMES[i] for i in np.argsort(truth(profiles))]

    store = SessionStore(home / "elicitation.duckdb", read_only=True)
    config = store.load_config("pick")
    store.close()
    np.testing.assert_array_equal(config.candidate_profiles(), profiles)  # stored exactly, in the labels' order
    assert config.candidate_names == tuple(NAMES) and config.candidates_partition == DAY

    code, replayed = elicit(home, ScriptedAnswerer(truth, seed=99), "--session", "pick", "--replay")
    assert code == EXIT_OK
    assert replayed.split("answers stored).\n", 1)[1] == "Elicited metric after" + picking.split("Elicited metric after")[1]
    code, resumed = elicit(home, ScriptedAnswerer(truth, seed=1), "--session", "general", "--partition", "latest")
    assert code == EXIT_OK and "--partition applies to new sessions; this session's candidates are none." in resumed
    assert "Candidates by elicited cost" not in resumed
    recorded = elicit_recorded(home / "elicitation.duckdb", "pick")  # what the elicited_metric asset replays
    assert recorded.metric.n_queries == answers(picking)
    assert metric_to_dict(recorded.metric)["lam"] == pytest.approx(
        float(re.search(r"lambda = ([\d.]+)", picking).group(1)), abs=5e-4)


def test_a_dated_partition_and_its_errors_are_one_line_each(home):
    profiles, truth = candidates_and_truth()
    person = ScriptedAnswerer(truth, seed=1)
    with pytest.raises(ValueError, match=r"no warehouse at .*warehouse\.duckdb: this home has no model_selection"):
        elicit(home, person, "--partition", "latest")
    write_ranking(home, profiles)
    with pytest.raises(ValueError, match=r"marts\.model_ranking has no rows for partition 2026-03-05"):
        elicit(home, person, "--partition", "2026-03-05")
    with pytest.raises(ValueError, match=r"partition 2026-03-04 has 3 groups but --groups is 2; leave --groups out"):
        elicit(home, person, "--partition", "2026-03-04", "--groups", "2")
    with pytest.raises(ValueError, match=r"--group-labels \['a', 'b', 'c'\] do not name the groups"):
        elicit(home, person, "--partition", "2026-03-04", "--group-labels", "a,b,c")
    with pytest.raises(ValueError, match="--partition needs --method adaptive"):
        elicit(home, person, "--partition", "2026-03-04", "--method", "qpme")
    nan = np.full_like(profiles[:2], np.nan)
    write_ranking(home, nan, day=DAY + dt.timedelta(days=2), names=NAMES[:2])
    with pytest.raises(ValueError, match=r"partition 2026-03-06: no candidate has rates in every group"):
        elicit(home, person, "--partition", "latest")
    with pytest.raises(SystemExit):
        parser().parse_args(["--partition", "yesterday"])
    store = SessionStore(home / "elicitation.duckdb", read_only=True)
    assert store.list_sessions() == []  # nothing half-stored
    store.close()
