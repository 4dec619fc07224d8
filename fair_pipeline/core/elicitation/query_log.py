"""Every oracle query goes through a QueryLog: validation, counting, caching and cycle detection.

Answers are stored as directed edges winner -> loser between rate profiles.  A set of answers is
consistent with *some* metric only if this graph has no directed cycle, so a new edge that closes a
cycle proves the oracle contradicted itself (noise, or a person answering carelessly).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .validation import check_rate_profile

Oracle = Callable[[np.ndarray, np.ndarray], bool]


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
    votes: odd number of answers per new pair; the oracle is asked until one side has a majority
    (so 2 calls when they agree), which makes independent answer flips rare at ~2x the queries.
    Every oracle call counts as a query.
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
    n_split_votes: int = 0
    records: list[QueryRecord] = field(default_factory=list)
    cycles: list[PreferenceCycle] = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False)
    _edges: dict = field(default_factory=dict, repr=False)  # winner key -> {loser key: query index}

    def __post_init__(self) -> None:
        if self.on_inconsistency not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_inconsistency must be 'warn', 'raise' or 'ignore', got {self.on_inconsistency!r}")
        if int(self.votes) != self.votes or self.votes < 1 or self.votes % 2 == 0:
            raise ValueError(f"votes must be an odd positive integer, got {self.votes!r}")

    @property
    def n_queries(self) -> int:
        return len(self.records)

    def ask(self, r1, r2) -> bool:
        """True iff the oracle prefers r1 to r2.  Repeated or reversed pairs are answered from cache."""
        r1 = check_rate_profile(r1, self.n_groups, self.n_classes, name="query profile r1")
        r2 = check_rate_profile(r2, self.n_groups, self.n_classes, name="query profile r2")
        self._check_in_sphere(r1)
        self._check_in_sphere(r2)
        k1, k2 = profile_key(r1), profile_key(r2)
        if k1 == k2:
            return False  # strict preference: a profile is never preferred to itself
        if (k1, k2) in self._cache:
            return self._cache[(k1, k2)]
        if (k2, k1) in self._cache:
            return not self._cache[(k2, k1)]
        votes = self.votes
        if self.vote_distance is not None and np.linalg.norm(r1 - r2, axis=1).max() < self.vote_distance:
            votes = 1
        needed = (votes + 1) // 2
        yes = no = 0
        while yes < needed and no < needed:
            vote = self._call(r1, r2)
            yes, no = yes + vote, no + (not vote)
        if yes and no:
            self.n_split_votes += 1
        answer = yes >= needed
        self._cache[(k1, k2)] = answer
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
