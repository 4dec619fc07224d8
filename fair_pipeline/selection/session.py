"""Interactive metric elicitation in a terminal, persisted in DuckDB (``fair-pipeline elicit``).

A person is shown two candidate rate profiles side by side (per-group TPR and TNR and the overall
rates, as percentages, with the difference B - A and its largest entries marked) and picks the one
they prefer, or says they are about the same.  New sessions use ``INTERACTIVE_DEFAULTS`` (adaptive
questions, at most 40 answers); sessions stored with the paper's QPME replay with it.  Every answer is written to DuckDB with a timestamp the
moment it is given.  Elicitation is deterministic given its answers, so an interrupted session
(``q``, end of input, Ctrl-C) resumes exactly where it stopped by replaying the stored answers, and
a finished session can be replayed to recompute its metric.  After the comparisons one more question prices the
exposure weight mu in accuracy points under the elicited metric (`elicitation.exposure_question`); its answer is
stored with the session.

Tables (schema ``elicitation``): ``sessions`` (settings, exposure answer, status, result) and ``answers``
(one row per question: both profiles, which one was shown as A, the choice, the time).
"""
from __future__ import annotations

import datetime as dt
import json
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

import duckdb
import numpy as np

from fair_pipeline.platform.warehouse import quote_identifier
from fair_pipeline.selection.elicitation import (
    DEFAULT_RADIUS,
    FairQuadraticMetric,
    INTERACTIVE_DEFAULTS,
    ReplayOracle,
    default_inner_radius,
    elicit_fair_quadratic_metric,
    group_pairs,
)
from fair_pipeline.selection.elicitation import exposure_question
from fair_pipeline.selection.elicitation.validation import check_group_weights

# Tables live in schema `elicitation`; the store selects it with USE, so the statements name tables unqualified
# (a file called elicitation.duckdb has a catalog of that name, and `elicitation.sessions` would be ambiguous).
TABLES_SQL = [
    """CREATE TABLE IF NOT EXISTS sessions (
        session_id VARCHAR PRIMARY KEY,
        created_at TIMESTAMPTZ NOT NULL,
        n_groups INTEGER NOT NULL,
        n_classes INTEGER NOT NULL,
        group_labels VARCHAR[] NOT NULL,
        group_weights DOUBLE[] NOT NULL,
        tolerance DOUBLE NOT NULL,
        radius DOUBLE NOT NULL,
        inner_radius DOUBLE NOT NULL,
        status VARCHAR NOT NULL,
        completed_at TIMESTAMPTZ,
        result_json VARCHAR,
        method VARCHAR DEFAULT 'qpme',
        candidates DOUBLE[],            -- flattened (n, n_groups, n_classes): the profiles whose order stops it
        candidate_names VARCHAR[],
        candidates_partition DATE,      -- the marts.model_ranking partition they were read from
        exposure_points DOUBLE,         -- answer to the exposure question (NULL: not answered yet)
        exposure_answered_at TIMESTAMPTZ
    )""",
    """CREATE TABLE IF NOT EXISTS answers (
        session_id VARCHAR NOT NULL,
        query_index INTEGER NOT NULL,
        r1 DOUBLE[] NOT NULL,
        r2 DOUBLE[] NOT NULL,
        r1_shown_as VARCHAR NOT NULL,
        choice VARCHAR NOT NULL,
        r1_preferred BOOLEAN,  -- NULL: "about the same"
        answered_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (session_id, query_index)
    )""",
]
# Files written before "about the same" answers, the adaptive method and candidates existed.
UPGRADE_SQL = [
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS method VARCHAR DEFAULT 'qpme'",
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS candidates DOUBLE[]",
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS candidate_names VARCHAR[]",
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS candidates_partition DATE",
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS exposure_points DOUBLE",
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS exposure_answered_at TIMESTAMPTZ",
    "ALTER TABLE answers ALTER COLUMN r1_preferred DROP NOT NULL",
]


class SessionPaused(Exception):
    """The person stopped answering; the session can be resumed."""


@dataclass(frozen=True)
class SessionConfig:
    n_groups: int = 2
    n_classes: int = 2
    group_labels: tuple[str, ...] = ("group 1", "group 2")
    group_weights: tuple[float, ...] | None = None  # flattened (n_groups, n_classes); None = uniform
    tolerance: float = 1e-2
    radius: float = DEFAULT_RADIUS
    inner_radius: float | None = None  # None: the core default (radius / 10)
    method: str = "adaptive"  # "qpme": the paper's questions (sessions stored before the adaptive method)
    candidates: tuple[float, ...] | None = None  # flattened (n, n_groups, n_classes); stop once their order is settled
    candidate_names: tuple[str, ...] | None = None
    candidates_partition: dt.date | None = None

    def inner(self) -> float:
        return default_inner_radius(self.radius) if self.inner_radius is None else self.inner_radius

    def elicitation_options(self) -> dict:
        """Keyword arguments of `elicit_fair_quadratic_metric` for this session."""
        common = {"group_weights": self.tau(), "radius": self.radius}
        if self.method == "adaptive":
            return common | INTERACTIVE_DEFAULTS | {"candidates": self.candidate_profiles()}
        return common | {"tolerance": self.tolerance, "inner_radius": self.inner(), "method": "qpme"}

    def candidate_profiles(self) -> np.ndarray | None:
        if self.candidates is None:
            return None
        return np.reshape(self.candidates, (-1, self.n_groups, self.n_classes))

    def tau(self) -> np.ndarray:
        w = None if self.group_weights is None else np.reshape(self.group_weights, (self.n_groups, self.n_classes))
        return check_group_weights(w, self.n_groups, self.n_classes)


class SessionStore:
    """DuckDB persistence of sessions and answers; every value is a bound parameter."""

    def __init__(self, db_path: str | Path, read_only: bool = False):
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(db_path), read_only=read_only)
        schema = quote_identifier(self.con.execute("SELECT current_database()").fetchone()[0]) + ".elicitation"
        if not read_only:  # a reader (model selection) replays sessions without touching the file
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        self.con.execute(f"USE {schema}")
        if not read_only:
            for sql in TABLES_SQL + UPGRADE_SQL:
                self.con.execute(sql)

    def close(self) -> None:
        self.con.close()

    def load_config(self, session_id: str) -> SessionConfig | None:
        # SELECT *: a reader opens files written before the candidate columns existed without upgrading them
        cursor = self.con.execute("SELECT * FROM sessions WHERE session_id = ?", [session_id])
        row = cursor.fetchone()
        if row is None:
            return None
        stored = dict(zip([d[0] for d in cursor.description], row))
        optional = lambda name: None if stored.get(name) is None else tuple(stored[name])  # noqa: E731
        return SessionConfig(stored["n_groups"], stored["n_classes"], tuple(stored["group_labels"]),
                             tuple(stored["group_weights"]), stored["tolerance"], stored["radius"],
                             stored["inner_radius"], stored.get("method") or "qpme", optional("candidates"),
                             optional("candidate_names"), stored.get("candidates_partition"))

    def create(self, session_id: str, config: SessionConfig) -> None:
        self.con.execute(
            "INSERT INTO sessions (session_id, created_at, n_groups, n_classes, group_labels, group_weights, "
            "tolerance, radius, inner_radius, status, method, candidates, candidate_names, candidates_partition) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'in_progress', ?, ?, ?, ?)",
            [session_id, _now(), config.n_groups, config.n_classes, list(config.group_labels),
             config.tau().ravel().tolist(), config.tolerance, config.radius, config.inner(), config.method,
             None if config.candidates is None else list(config.candidates),
             None if config.candidate_names is None else list(config.candidate_names), config.candidates_partition],
        )

    def answers(self, session_id: str) -> list[tuple[np.ndarray, np.ndarray, bool | None]]:
        """(r1, r2, r1_preferred) per answer in order; r1_preferred None is "about the same"."""
        rows = self.con.execute(
            "SELECT r1, r2, r1_preferred FROM answers WHERE session_id = ? ORDER BY query_index",
            [session_id],
        ).fetchall()
        return [(np.asarray(r1), np.asarray(r2), None if p is None else bool(p)) for r1, r2, p in rows]

    def record_answer(self, session_id: str, index: int, r1, r2, r1_shown_as: str, choice: str,
                      r1_preferred: bool | None) -> None:
        self.con.execute(
            "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [session_id, index, np.ravel(r1).tolist(), np.ravel(r2).tolist(), r1_shown_as, choice,
             None if r1_preferred is None else bool(r1_preferred), _now()],
        )

    def exposure_answer(self, session_id: str) -> float | None:
        """The stored answer to the exposure question (points), None if not answered (or a file from before it)."""
        cursor = self.con.execute("SELECT * FROM sessions WHERE session_id = ?", [session_id])
        row = cursor.fetchone()
        stored = dict(zip([d[0] for d in cursor.description], row)) if row else {}
        return None if stored.get("exposure_points") is None else float(stored["exposure_points"])

    def record_exposure_answer(self, session_id: str, points: float) -> None:
        self.con.execute("UPDATE sessions SET exposure_points = ?, exposure_answered_at = ? WHERE session_id = ?",
                         [float(points), _now(), session_id])

    def finish(self, session_id: str, status: str, result: dict | None) -> None:
        self.con.execute(
            "UPDATE sessions SET status = ?, completed_at = ?, result_json = ? WHERE session_id = ?",
            [status, _now(), None if result is None else json.dumps(result), session_id],
        )

    def list_sessions(self):
        return self.con.execute(
            "SELECT s.session_id, s.status, s.created_at, count(a.query_index) AS n_answers "
            "FROM sessions s LEFT JOIN answers a USING (session_id) "
            "GROUP BY ALL ORDER BY s.created_at"
        ).fetchall()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def format_comparison(index: int, left: np.ndarray, right: np.ndarray, labels, tau: np.ndarray) -> str:
    """Two profiles side by side as percentages: per-group rates, overall rates r = sum_g tau^g * r^g, and
    the difference B - A in percentage points, its largest entries marked with "<"."""
    k = left.shape[1]
    names = ["TPR", "TNR"] if k == 2 else [f"class {i + 1}" for i in range(k)]
    width = max(10, max(len(str(g)) for g in labels) + 2)
    rows = [(str(label), left[g], right[g]) for g, label in enumerate(labels)]
    rows.append(("overall", (tau * left).sum(0), (tau * right).sum(0)))
    diffs = np.array([100.0 * (b - a) for _, a, b in rows])
    biggest = np.abs(diffs).max()
    pct = lambda values: "".join(f"{_percent(v):>8}" for v in values)  # noqa: E731
    block = 8 * k
    lines = [
        f"Question {index + 1}: which model do you prefer?",
        " " * width + f"{'Model A':^{block}}   {'Model B':^{block}}   {'B - A (points)':^{10 * k}}",
        f"{'group':<{width}}" + "".join(f"{n:>8}" for n in names) + "   " + "".join(f"{n:>8}" for n in names)
        + "   " + "".join(f"{n:>8}  " for n in names),
    ]
    for (label, a, b), d in zip(rows, diffs):
        marks = ["<" if biggest > 0 and abs(x) >= 0.5 * biggest else " " for x in d]
        lines.append(f"{label:<{width}}{pct(a)}   {pct(b)}   "
                     + "".join(f"{_points(x):>8} {m}" for x, m in zip(d, marks)))
    return "\n".join(lines)


def _percent(rate: float) -> str:
    value = 100.0 * rate
    return f"{value:.0f}%" if abs(value - round(value)) < 1e-6 else f"{value:.1f}%"


def _points(diff: float) -> str:
    return "0" if abs(diff) < 0.05 else (f"{diff:+.0f}" if abs(diff - round(diff)) < 1e-6 else f"{diff:+.1f}")


class TerminalOracle:
    """Asks a person through text streams and stores each answer before returning it.  Which profile
    is shown as "Model A" is randomised per question (seeded by session and question number, so a
    resumed session shows the same screens) to keep a habit of always picking A from biasing the
    metric: such answers turn into detectable preference cycles instead."""

    def __init__(self, store: SessionStore, session_id: str, config: SessionConfig, first_index: int,
                 stdin: TextIO, stdout: TextIO):
        self.store, self.session_id, self.config = store, session_id, config
        self.index = first_index
        self.stdin, self.stdout = stdin, stdout
        self.tau = config.tau()
        self._seed = zlib.crc32(session_id.encode())

    def __call__(self, r1, r2) -> bool:
        swap = bool(np.random.default_rng([self._seed, self.index]).integers(2))
        left, right = (r2, r1) if swap else (r1, r2)
        print(format_comparison(self.index, left, right, self.config.group_labels, self.tau), file=self.stdout)
        while True:
            print("Prefer A or B, or S if they are about the same? (q = stop, resume later) ", end="",
                  file=self.stdout, flush=True)
            try:
                line = self.stdin.readline()
            except KeyboardInterrupt:
                raise SessionPaused("interrupted") from None
            if not line:
                raise SessionPaused("end of input")
            choice = line.strip().upper()
            if choice == "Q":
                raise SessionPaused("stopped by the user")
            if choice in ("A", "B", "S"):
                break
            print(f"  please type A, B or S (about the same), not {line.strip()!r}", file=self.stdout)
        r1_preferred = None if choice == "S" else (choice == "A") != swap
        self.store.record_answer(self.session_id, self.index, r1, r2, "B" if swap else "A", choice, r1_preferred)
        self.index += 1
        return r1_preferred


def run_session(store: SessionStore, session_id: str, config: SessionConfig, stdin: TextIO, stdout: TextIO,
                *, interactive: bool = True) -> FairQuadraticMetric:
    """Replay the stored answers of ``session_id`` and, if ``interactive``, ask for the rest.
    Raises SessionPaused if the person stops, MissingPreferenceError if a replay needs more answers."""
    recorded = store.answers(session_id)
    fallback = TerminalOracle(store, session_id, config, len(recorded), stdin, stdout) if interactive else None
    oracle = ReplayOracle(recorded, fallback=fallback)
    return elicit_fair_quadratic_metric(oracle, config.n_groups, config.n_classes, on_inconsistency="ignore",
                                        **config.elicitation_options())


def ask_exposure_points(metric: FairQuadraticMetric, labels, stdin: TextIO, stdout: TextIO) -> float:
    """The exposure question (`elicitation.exposure_question`), asked until the answer is valid.
    Raises SessionPaused on ``q``, end of input or Ctrl-C."""
    print(exposure_question.question_text(metric, labels), file=stdout)
    while True:
        print(exposure_question.PROMPT, end="", file=stdout, flush=True)
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            raise SessionPaused("interrupted") from None
        if not line:
            raise SessionPaused("end of input")
        if line.strip().upper() == "Q":
            raise SessionPaused("stopped by the user")
        try:
            return exposure_question.parse_points(line)
        except ValueError as error:
            print(f"  {error}", file=stdout)


def describe_metric(metric: FairQuadraticMetric, labels) -> str:
    stopped = metric.diagnostics.get("stopped_because")
    lines = [
        f"Elicited metric after {metric.n_queries} answers (cost; lower is better)"
        + (f"; stopped at {stopped}:" if stopped else ":"),
        f"  trade-off lambda = {metric.lam:.3f}  (0 = only errors matter, 1 = only group disparities)"
        + _band_text(metric),
        "  misclassification costs a = " + ", ".join(f"{x:.3f}" for x in metric.a),
    ]
    for (u, v), b in zip(group_pairs(metric.n_groups), metric.pair_matrices()):
        lines.append(f"  disparity weights B[{labels[u]} vs {labels[v]}] = {np.round(b, 3).tolist()}")
    if "expected_agreement" in metric.diagnostics:
        diag = metric.diagnostics
        lines.append(f"  orders {diag['expected_agreement']:.0%} of pairs of models whose cost differs by "
                     f"{diag['resolution']:.0%} or more as you would (posterior expectation); "
                     f"{diag['n_about_same']} 'about the same' answers")
        if diag["n_unexpected_answers"]:
            lines.append(f"  {diag['n_unexpected_answers']} answers disagree with this metric by more than "
                         f"{diag['resolution']:.0%}; they were weighed as slips, not as errors")
    if metric.exposure_weight_source:
        lines.append(f"  exposure weight mu = {metric.exposure_weight:.4g} x exposure disparity on the logs "
                     f"({metric.exposure_weight_source})")
    cycles = metric.diagnostics.get("cycles", [])
    if cycles:
        lines.append(f"  WARNING: {len(cycles)} inconsistent answer sets (preference cycles), e.g. "
                     + "; ".join(c.describe() for c in cycles[:3]))
    return "\n".join(lines)


def _band_text(metric: FairQuadraticMetric) -> str:
    band = metric.diagnostics.get("tolerance_band", {})
    if not band.get("n_draws"):
        return ""
    lo, hi = band["lam_interval"]
    if band.get("kind") == "posterior":
        return f"; 95% posterior interval [{lo:.3f}, {hi:.3f}]"
    return f"; 95% band from the search tolerance [{lo:.3f}, {hi:.3f}]"


def describe_candidates(metric: FairQuadraticMetric, config: SessionConfig) -> str:
    """The candidates in the elicited metric's order, and whether the answers settled it."""
    profiles = config.candidate_profiles()
    costs = np.atleast_1d(metric(profiles))
    settled = metric.diagnostics.get("candidate_order_settled")
    n = len(costs)
    if metric.diagnostics.get("stopped_because") == "the answers settle the order of the candidates":
        head = (f"Stopped after {metric.n_queries} answers: the order of the {n} candidates of partition "
                f"{config.candidates_partition} is settled (posterior probability at least {settled:.2f}, pair by pair, "
                f"that the order below is right or the two differ by less than {metric.diagnostics['resolution']:.0%}).")
    else:
        head = (f"The order of the {n} candidates of partition {config.candidates_partition} is not settled after "
                f"{metric.n_queries} answers (posterior probability {settled:.2f} for its least sure pair).")
    width = max(len(name) for name in config.candidate_names)
    lines = [head, "Candidates by elicited cost (lower is better):"]
    for place, i in enumerate(np.argsort(costs, kind="stable"), start=1):
        lines.append(f"  {place:>3}. {config.candidate_names[i]:<{width}}  {costs[i]:.4f}")
    return "\n".join(lines)
