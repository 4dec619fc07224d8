"""Oracles answering ``oracle(r1, r2) -> bool`` ("is rate profile r1 preferred to r2?")."""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from fair_pipeline.selection.elicitation.metric import FairQuadraticMetric
from fair_pipeline.selection.elicitation.query_log import profile_key
from fair_pipeline.selection.elicitation.validation import check_rate_profile


class SimulatedOracle:
    """Answers from a ground-truth metric (lower cost preferred); flips each answer independently
    with probability ``flip_fraction`` (a noisy person).  ``n_flipped`` counts the flips made."""

    label = "simulated"

    def __init__(self, metric: FairQuadraticMetric, flip_fraction: float = 0.0, seed=None):
        if not 0.0 <= flip_fraction < 0.5:
            raise ValueError(f"flip_fraction must be in [0, 0.5), got {flip_fraction!r}")
        self.metric = metric
        self.flip_fraction = float(flip_fraction)
        self._rng = np.random.default_rng(seed)
        self.n_calls = 0
        self.n_flipped = 0

    def __call__(self, r1, r2) -> bool:
        self.n_calls += 1
        answer = bool(self.metric(r1) < self.metric(r2))
        if self.flip_fraction and self._rng.random() < self.flip_fraction:
            self.n_flipped += 1
            answer = not answer
        return answer


class MissingPreferenceError(LookupError):
    """A recorded-preferences oracle was asked a question its table does not answer."""


class RecordedPreferenceOracle:
    """Replays a table of answers: columns ``r1``, ``r2`` (profiles, shape (m, k) or flattened) and
    ``r1_preferred`` (bool).  A reversed pair is answered by negation.  Unknown questions go to
    ``fallback`` (e.g. a person) if given, else raise MissingPreferenceError."""

    label = "recorded"

    def __init__(self, table: pd.DataFrame | Iterable, n_groups: int, n_classes: int,
                 fallback: Callable[[np.ndarray, np.ndarray], bool] | None = None):
        df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table), columns=["r1", "r2", "r1_preferred"])
        missing = {"r1", "r2", "r1_preferred"} - set(df.columns)
        if missing:
            raise ValueError(f"recorded preferences need columns r1, r2, r1_preferred; missing {sorted(missing)}")
        self.n_groups, self.n_classes = n_groups, n_classes
        self.fallback = fallback
        self.n_replayed = 0
        self._answers: dict = {}
        for row_no, row in enumerate(df.itertuples(index=False)):
            r1 = self._profile(row.r1, f"row {row_no} column r1")
            r2 = self._profile(row.r2, f"row {row_no} column r2")
            if not isinstance(row.r1_preferred, (bool, np.bool_)):
                raise ValueError(f"row {row_no} column r1_preferred must be a bool, got {row.r1_preferred!r}")
            k1, k2 = profile_key(r1), profile_key(r2)
            answer = bool(row.r1_preferred)
            previous = self._answers.get((k1, k2), self._flip(self._answers.get((k2, k1))))
            if previous is not None and previous != answer:
                raise ValueError(f"row {row_no} contradicts an earlier row about the same pair of profiles")
            self._answers[(k1, k2)] = answer

    @staticmethod
    def _flip(answer):
        return None if answer is None else not answer

    def _profile(self, value, where: str) -> np.ndarray:
        arr = np.asarray(value, dtype=float)
        if arr.size == self.n_groups * self.n_classes:
            arr = arr.reshape(self.n_groups, self.n_classes)
        return check_rate_profile(arr, self.n_groups, self.n_classes, name=where)

    def __len__(self) -> int:
        return len(self._answers)

    def __call__(self, r1, r2) -> bool:
        k1, k2 = profile_key(np.asarray(r1, dtype=float)), profile_key(np.asarray(r2, dtype=float))
        if (k1, k2) in self._answers:
            self.n_replayed += 1
            return self._answers[(k1, k2)]
        if (k2, k1) in self._answers:
            self.n_replayed += 1
            return not self._answers[(k2, k1)]
        if self.fallback is None:
            raise MissingPreferenceError(
                f"no recorded answer for r1={np.round(r1, 4).tolist()} vs r2={np.round(r2, 4).tolist()} "
                f"({len(self._answers)} recorded pairs)"
            )
        return self.fallback(r1, r2)


class ReplayMismatchError(ValueError):
    """A replayed session was asked a different question than the one recorded at that position."""


class ReplayOracle:
    """Answers the first ``len(records)`` questions from ``records`` *in order* (each a
    (r1, r2, r1_preferred) triple), checking that every question is the one recorded at that
    position, then defers to ``fallback`` (or raises MissingPreferenceError).  Elicitation is
    deterministic given its answers, so this resumes an interrupted session exactly where it stopped;
    a mismatch means the settings changed since the answers were recorded."""

    label = "replay"

    def __init__(self, records: Sequence, fallback: Callable[[np.ndarray, np.ndarray], bool] | None = None):
        self.records = list(records)
        self.fallback = fallback
        self.position = 0

    @property
    def exhausted(self) -> bool:
        return self.position >= len(self.records)

    def __call__(self, r1, r2) -> bool:
        if self.exhausted:
            if self.fallback is None:
                raise MissingPreferenceError(
                    f"all {len(self.records)} recorded answers replayed; question {self.position} is not recorded"
                )
            self.position += 1
            return self.fallback(r1, r2)
        rec_r1, rec_r2, answer = self.records[self.position]
        same = lambda x, y: np.shape(np.ravel(x)) == np.shape(np.ravel(y)) and np.allclose(np.ravel(x), np.ravel(y), atol=1e-9)  # noqa: E731
        if not (same(rec_r1, r1) and same(rec_r2, r2)):
            raise ReplayMismatchError(
                f"question {self.position} differs from the recorded one (were the radius, tolerance, "
                f"groups or weights changed?): asked {np.round(r1, 4).tolist()} vs {np.round(r2, 4).tolist()}, "
                f"recorded {np.round(rec_r1, 4).tolist()} vs {np.round(rec_r2, 4).tolist()}"
            )
        self.position += 1
        return None if answer is None else bool(answer)  # None: "about the same"
