"""Every oracle query goes through a QueryLog: validation, counting, caching and cycle detection.

Answers are stored as directed edges winner -> loser between rate profiles.  A set of answers is
consistent with *some* metric only if this graph has no directed cycle, so a new edge that closes a
cycle proves the oracle contradicted itself (noise, or a person answering carelessly).
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fair_pipeline.selection.elicitation.validation import check_rate_profile

Oracle = Callable[[np.ndarray, np.ndarray], bool]


def _check_votes(votes) -> None:
    if int(votes) != votes or votes < 1 or votes % 2 == 0:
        raise ValueError(f"votes must be an odd positive integer, got {votes!r}")


def _majority(tally: list[int]) -> bool | None:
    """True if r1 leads, False if r2 leads, None before any answer (ties never persist)."""
    return None if tally == [0, 0] else tally[0] > tally[1]


class InconsistentOracleError(RuntimeError):
    """The oracle's answers contain a preference cycle."""


class InconsistentOracleWarning(UserWarning):
    """The oracle's answers contain a preference cycle (elicitation continued)."""


@dataclass(frozen=True)
class QueryRecord:
    index: int
    r1: np.ndarray
    r2: np.ndarray
    r1_preferred: bool


@dataclass(frozen=True)
class PreferenceCycle:
    """Queries whose answers form a cycle r_a > r_b > ... > r_a (indices into QueryLog.records)."""

    query_indices: tuple[int, ...]

    def describe(self) -> str:
        return "preference cycle through queries " + " -> ".join(str(i) for i in self.query_indices)


def profile_key(r: np.ndarray) -> tuple:
    """Hashable identity of a rate profile (rounded to 1e-12)."""
    return tuple(np.round(r.ravel(), 12).tolist())


@dataclass
class QueryLog:
    """Wraps ``oracle(r1, r2) -> bool`` ("r1 preferred to r2").

    radius / center: if given, every query must lie within ``radius`` of ``center`` for every group
    (the feasible sphere); a violation is a programming error and raises.
    on_inconsistency: "warn" (default), "raise" or "ignore" when a cycle is detected.
    votes: odd number; a question's answer is the majority of ``votes`` oracle calls, asked
    sequentially until one side has (votes + 1) / 2 (so 2 calls when they agree).  Every oracle call
    counts as a query.  A question asked again after ``votes`` was raised (see ``requiring``) gets
    only the missing calls, so earlier answers are never wasted and a flipped one can be out-voted.
    vote_distance: if set, only pairs at least this far apart (max over groups of |r1^g - r2^g|)
    get ``votes`` answers and nearer pairs get one.  In a bisection the far pairs are the coarse,
    early questions whose wrong answers cost the most.
    """

    oracle: Oracle
    n_groups: int
    n_classes: int
    center: np.ndarray | None = None
    radius: float | None = None
    on_inconsistency: str = "warn"
    votes: int = 1
    vote_distance: float | None = None
    records: list[QueryRecord] = field(default_factory=list)
    cycles: list[PreferenceCycle] = field(default_factory=list)
    _tally: dict = field(default_factory=dict, repr=False)  # (r1 key, r2 key) -> [r1 preferred, r2 preferred]
    _edges: dict = field(default_factory=dict, repr=False)  # winner key -> {loser key: query index}

    def __post_init__(self) -> None:
        if self.on_inconsistency not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_inconsistency must be 'warn', 'raise' or 'ignore', got {self.on_inconsistency!r}")
        _check_votes(self.votes)

    @property
    def n_queries(self) -> int:
        return len(self.records)

    @property
    def n_split_votes(self) -> int:
        """Questions whose oracle calls disagreed (each such question had a flipped answer)."""
        return sum(1 for yes, no in self._tally.values() if yes and no)

    @contextmanager
    def requiring(self, votes: int, vote_distance: float | None = None):
        """Within the block, questions (new or already answered) need a majority of ``votes`` calls."""
        _check_votes(votes)
        saved = self.votes, self.vote_distance
        self.votes, self.vote_distance = votes, vote_distance
        try:
            yield self
        finally:
            self.votes, self.vote_distance = saved

    def ask(self, r1, r2) -> bool:
        """True iff the oracle prefers r1 to r2 (the majority of its answers).  A repeated or reversed
        pair is answered from its tally, with only the calls a raised ``votes`` still needs."""
        r1 = check_rate_profile(r1, self.n_groups, self.n_classes, name="query profile r1")
        r2 = check_rate_profile(r2, self.n_groups, self.n_classes, name="query profile r2")
        self._check_in_sphere(r1)
        self._check_in_sphere(r2)
        k1, k2 = profile_key(r1), profile_key(r2)
        if k1 == k2:
            return False  # strict preference: a profile is never preferred to itself
        if (k2, k1) in self._tally:  # reversed pair: one tally per unordered pair
            return not self.ask(r2, r1)
        tally = self._tally.setdefault((k1, k2), [0, 0])
        before = _majority(tally)
        votes = self.votes
        if self.vote_distance is not None and np.linalg.norm(r1 - r2, axis=1).max() < self.vote_distance:
            votes = 1
        needed = (votes + 1) // 2
        while max(tally) < needed:
            tally[0 if self._call(r1, r2) else 1] += 1
        answer = _majority(tally)
        if answer != before:
            if before is not None:  # out-voted: the earlier majority's edge goes
                old_winner, old_loser = (k1, k2) if before else (k2, k1)
                del self._edges[old_winner][old_loser]
            winner, loser = (k1, k2) if answer else (k2, k1)
            self._add_edge(winner, loser, len(self.records) - 1)
        return answer

    def _call(self, r1: np.ndarray, r2: np.ndarray) -> bool:
        answer = self.oracle(r1.copy(), r2.copy())
        if not isinstance(answer, (bool, np.bool_)):
            raise TypeError(f"oracle must return a bool (r1 preferred to r2), got {type(answer).__name__}: {answer!r}")
        self.records.append(QueryRecord(len(self.records), r1, r2, bool(answer)))
        return bool(answer)

    def _check_in_sphere(self, r: np.ndarray) -> None:
        if self.radius is None:
            return
        dist = np.linalg.norm(r - self.center, axis=1).max()
        if dist > self.radius * (1 + 1e-9) + 1e-12:
            raise AssertionError(f"query left the feasible sphere: distance {dist:.6g} > radius {self.radius:.6g}")

    def _add_edge(self, winner: tuple, loser: tuple, index: int) -> None:
        path = self._path(loser, winner)
        self._edges.setdefault(winner, {})[loser] = index
        if path is None:
            return
        cycle = PreferenceCycle(tuple(path) + (index,))
        self.cycles.append(cycle)
        message = f"oracle answered inconsistently: {cycle.describe()}"
        if self.on_inconsistency == "raise":
            raise InconsistentOracleError(message)
        if self.on_inconsistency == "warn":
            warnings.warn(message, InconsistentOracleWarning, stacklevel=3)

    def _path(self, start: tuple, goal: tuple) -> list[int] | None:
        """Query indices along a winner->loser path from start to goal, or None (iterative DFS)."""
        stack = [(start, [])]
        seen = {start}
        while stack:
            node, path = stack.pop()
            if node == goal:
                return path
            for nxt, idx in self._edges.get(node, {}).items():
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [idx]))
        return None
