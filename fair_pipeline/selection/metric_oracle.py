"""Which oracle drives model selection, and the metric it elicits (glue for the `elicited_metric` asset).

Two oracle kinds (`ORACLE_KINDS`):
  simulated  SIMULATION: answers come from a ground-truth fair metric (a, B, lam) written in the run config,
             optionally flipping a fraction of them; the truth is kept so the elicitation error is reported.
  recorded   a real person's answers, as `fair-pipeline elicit` stored them (`elicitation.answers` in
             `$FAIR_PIPELINE_HOME/elicitation.duckdb`), replayed question by question. Elicitation is
             deterministic given its answers, so the replay reproduces the session's metric exactly; a session
             that needs more answers, or whose answers form a preference cycle, is refused with the reason.
"""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import duckdb
import numpy as np

from fair_pipeline.selection.elicitation import (
    FairQuadraticMetric,
    InconsistentOracleError,
    InconsistentOracleWarning,
    MissingPreferenceError,
    ReplayMismatchError,
    ReplayOracle,
    SimulatedOracle,
    elicit_fair_quadratic_metric,
    elicitation_errors,
    group_pairs,
    satisfies_assumption4,
)
from fair_pipeline.selection.elicitation.exposure_question import with_exposure_answer
from fair_pipeline.selection.session import SessionConfig, SessionStore

ORACLE_KINDS = ("simulated", "recorded")


class OracleConfigError(ValueError):
    """Unknown oracle, a malformed ground-truth metric, no or unusable recorded answers: says what and where."""


@dataclasses.dataclass(frozen=True)
class SimulatedTruth:
    """The ground truth of the simulated oracle, as configured (normalised to Definition 4 by `truth_metric`)."""

    a: list[float]
    B: list[list[list[float]]]  # one k x k matrix per group pair, in group_pairs order; [] = identity for each
    lam: float
    flip_fraction: float = 0.0
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class ElicitationResult:
    metric: FairQuadraticMetric
    oracle_kind: str
    group_labels: tuple[str, ...]
    tolerance: float
    radius: float
    session_id: str | None = None     # recorded oracle
    truth: FairQuadraticMetric | None = None  # simulated oracle
    n_flipped: int = 0
    n_inconsistencies: int = 0

    @property
    def simulated(self) -> bool:
        return self.oracle_kind == "simulated"

    def errors(self) -> dict[str, float] | None:
        """|a_hat - a|_2, sum |B_hat - B|_F and |lam_hat - lam| against the simulated truth (None: no truth)."""
        return None if self.truth is None else dataclasses.asdict(elicitation_errors(self.truth, self.metric))


def truth_metric(truth: SimulatedTruth, n_groups: int, group_weights=None) -> FairQuadraticMetric:
    """Definition 4 metric from the configured truth: a scaled to |a|_2 = 1, the B^{uv} scaled together to
    1/2 sum |B^{uv}|_F = 1 (only the ratios matter to the oracle's answers). Empty B: every pair gets the
    identity, equally weighted. a must be >= 0 and not all 0; every B^{uv} symmetric positive semi-definite."""
    a = np.asarray(truth.a, dtype=float)
    k = a.size
    if a.ndim != 1 or k < 2 or not np.all(np.isfinite(a)) or (a < 0).any() or not a.any():
        raise OracleConfigError(f"simulated truth a={truth.a!r} must be >= 2 finite non-negative costs, not all 0")
    pairs = group_pairs(n_groups)
    mats = [np.eye(k) for _ in pairs] if not truth.B else [np.asarray(b, dtype=float) for b in truth.B]
    if len(mats) != len(pairs):
        raise OracleConfigError(f"simulated truth B has {len(mats)} matrices; {n_groups} groups need one per pair "
                                f"{[(u + 1, v + 1) for u, v in pairs]} ({len(pairs)})")
    for (u, v), b in zip(pairs, mats):
        where = f"simulated truth B for groups ({u + 1}, {v + 1})"
        if b.shape != (k, k) or not np.all(np.isfinite(b)):
            raise OracleConfigError(f"{where} must be a finite {k}x{k} matrix, got {b.tolist()}")
        if not np.allclose(b, b.T) or np.linalg.eigvalsh(b).min() < -1e-12:
            raise OracleConfigError(f"{where} must be symmetric positive semi-definite, got {b.tolist()}")
    total = sum(np.linalg.norm(b) for b in mats)
    if total == 0:
        raise OracleConfigError("simulated truth B is all zeros: the metric would ignore group disparities")
    if not 0.0 <= truth.lam <= 1.0:
        raise OracleConfigError(f"simulated truth lam={truth.lam!r} must be in [0, 1]")
    return FairQuadraticMetric.from_pairs(a / np.linalg.norm(a), [2.0 * b / total for b in mats], truth.lam,
                                          group_weights)


def elicit_simulated(truth: SimulatedTruth, group_labels: tuple[str, ...], tolerance: float, radius: float,
                     votes: int = 1, group_weights=None) -> ElicitationResult:
    """Elicit from the simulated oracle; cycles caused by flipped answers are tolerated and counted."""
    true_metric = truth_metric(truth, len(group_labels), group_weights)
    if not 0.0 <= truth.flip_fraction < 0.5:
        raise OracleConfigError(f"flip_fraction={truth.flip_fraction!r} must be in [0, 0.5)")
    oracle = SimulatedOracle(true_metric, truth.flip_fraction, seed=truth.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InconsistentOracleWarning)
        metric = elicit_fair_quadratic_metric(oracle, len(group_labels), true_metric.n_classes, tolerance, radius,
                                              true_metric.group_weights, votes=votes, on_inconsistency="ignore")
    return ElicitationResult(metric, "simulated", tuple(group_labels), tolerance, radius, truth=true_metric,
                             n_flipped=oracle.n_flipped, n_inconsistencies=len(metric.diagnostics.get("cycles", [])))


def truth_is_regular(result: ElicitationResult) -> bool:
    """Does the simulated truth satisfy the paper's Assumption 4 (elicitation is only guaranteed then)?"""
    return result.truth is not None and satisfies_assumption4(result.truth, result.radius)


def latest_session(store: SessionStore, db_path: Path) -> str:
    """The newest session with answers (completed ones first)."""
    sessions = [s for s in store.list_sessions() if s[3] > 0]
    if not sessions:
        raise OracleConfigError(f"recorded oracle: no elicitation session with answers in {db_path} "
                                "(run `fair-pipeline elicit` first)")
    completed = [s for s in sessions if s[1] == "completed"]
    return (completed or sessions)[-1][0]


def elicit_recorded(db_path: Path, session_id: str = "") -> ElicitationResult:
    """Replay a stored `fair-pipeline elicit` session (newest with answers if `session_id` is empty)."""
    db_path = Path(db_path)
    if not db_path.exists():
        raise OracleConfigError(f"recorded oracle: {db_path} does not exist (run `fair-pipeline elicit` first)")
    store = SessionStore(db_path, read_only=True)
    try:
        session_id = session_id or latest_session(store, db_path)
        config: SessionConfig | None = store.load_config(session_id)
        if config is None:
            raise OracleConfigError(f"recorded oracle: no session {session_id!r} in {db_path}")
        answers = store.answers(session_id)
        exposure_points = store.exposure_answer(session_id)
    except duckdb.CatalogException as error:
        raise OracleConfigError(f"recorded oracle: {db_path} has no elicitation tables ({error})") from error
    finally:
        store.close()
    if not answers:
        raise OracleConfigError(f"recorded oracle: session {session_id!r} in {db_path} has no answers")
    where = f"recorded oracle: session {session_id!r} in {db_path}"
    try:
        metric = elicit_fair_quadratic_metric(
            ReplayOracle(answers), config.n_groups, config.n_classes, on_inconsistency="raise",
            **config.elicitation_options())
    except MissingPreferenceError as error:
        raise OracleConfigError(f"{where} is incomplete ({len(answers)} answers): {error}; "
                                f"finish it with `fair-pipeline elicit --session {session_id}`") from error
    except InconsistentOracleError as error:
        raise OracleConfigError(f"{where}: the answers are inconsistent, no metric explains them: {error}") from error
    except ReplayMismatchError as error:
        raise OracleConfigError(f"{where}: {error}") from error
    metric = with_exposure_answer(metric, exposure_points)
    return ElicitationResult(metric, "recorded", tuple(config.group_labels), config.tolerance, config.radius,
                             session_id=session_id)
