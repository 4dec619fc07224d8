"""The simulator's configuration (`SimulationConfig`): population, groups, traffic and bias-curve knobs.

Apart from the simulator so that the commands can show its defaults in `--help` without loading pandas; the model
itself is documented in `fair_pipeline.ingestion.simulator`.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Literal

import numpy as np

BiasCurve = Literal["log2", "power"]
RESERVED_COLUMNS = ("item_id", "group_id", "relevance", "merit_score")


@dataclasses.dataclass(frozen=True)
class SimulationConfig:
    n_items: int = 50_000
    n_features: int = 8
    p_group: float = 0.7
    p_relevant_group0: float = 0.35
    p_relevant_group1: float = 0.45
    relevance_effect: float = 0.6
    group_effect: float = 2.0
    relevance_sd: float = 0.5
    score_noise_sd: float = 0.2
    slots: int = 50
    bias_curve: BiasCurve = "log2"
    power_eta: float = 1.0
    requests_per_day: int = 25_000  # production (observational) requests per day
    shuffle_share: float = 0.2  # shuffled requests per day, as a share of production requests
    adjacent_swap_share: float = 0.2  # adjacent-swap requests per day, as a share of production requests
    seed: int = 0
    groups: int = 2
    group_shares: str = ""  # ";"-separated, one per group; "" = equal shares (K > 2) or p_group (K = 2)
    group_relevance: str = ""  # P(Y(1) = 1 | C = c) per group; "" = evenly spaced p_relevant_group0..1
    group_effects: str = ""  # term of group c in R; "" = evenly spaced 0..group_effect
    group_labels: str = ""  # group_id text per group; "" = "0".."K-1"
    # JSON object {attribute: [values]}: the groups are the crossed cells (first attribute slowest), each item gets
    # one column per attribute; "" = no attribute columns
    group_attributes: str = ""

    def __post_init__(self) -> None:
        problems = []
        if self.n_items < self.slots:
            problems.append(f"n_items={self.n_items} must be >= slots={self.slots}")
        if self.slots < 2:
            problems.append(f"slots={self.slots} must be >= 2")
        if self.n_features < 2:
            problems.append(f"n_features={self.n_features} must be >= 2 (f0, f1 carry the relevance)")
        for name in ("p_group", "p_relevant_group0", "p_relevant_group1"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"{name}={getattr(self, name)} must be in [0, 1]")
        for name in ("relevance_sd", "score_noise_sd", "shuffle_share", "adjacent_swap_share", "requests_per_day"):
            if getattr(self, name) < 0:
                problems.append(f"{name}={getattr(self, name)} must be >= 0")
        if self.bias_curve not in ("log2", "power"):
            problems.append(f"bias_curve={self.bias_curve!r} must be 'log2' or 'power'")
        if self.bias_curve == "power" and self.power_eta <= 0:
            problems.append(f"power_eta={self.power_eta} must be > 0")
        problems += self._group_problems()
        if problems:
            raise ValueError("invalid SimulationConfig: " + "; ".join(problems))

    def _group_problems(self) -> list[str]:
        if self.groups < 2:
            return [f"groups={self.groups} must be >= 2"]
        problems = self._attribute_problems()
        for name in ("group_shares", "group_relevance", "group_effects", "group_labels"):
            value = getattr(self, name)
            if value and len(value.split(";")) != self.groups:
                problems.append(f"{name}={value!r} must list {self.groups} values separated by ';'")
        if problems:
            return problems
        try:
            shares, relevance, _ = self.group_shares_array, self.group_relevance_array, self.group_effects_array
        except ValueError as exc:
            return [f"group lists must be numbers: {exc}"]
        if np.any(shares < 0) or not np.isclose(shares.sum(), 1.0):
            problems.append(f"group_shares={self.group_shares!r} must be >= 0 and sum to 1")
        if np.any((relevance < 0) | (relevance > 1)):
            problems.append(f"group_relevance={self.group_relevance!r} must lie in [0, 1]")
        labels = self.group_label_list
        if len(set(labels)) != len(labels) or any(not label for label in labels):
            problems.append(f"group_labels={self.group_labels!r} must be distinct and non-empty")
        return problems

    def _attribute_problems(self) -> list[str]:
        if not self.group_attributes:
            return []
        try:
            attributes = json.loads(self.group_attributes)
        except ValueError as exc:
            return [f"group_attributes={self.group_attributes!r} is not JSON: {exc}"]
        if (not isinstance(attributes, dict) or not attributes or any(
                not isinstance(v, list) or not v or len(set(map(str, v))) != len(v) for v in attributes.values())):
            return [f"group_attributes={self.group_attributes!r} must be a JSON object of attribute: [distinct values]"]
        reserved = [a for a in attributes if a in RESERVED_COLUMNS or a.startswith("f") or not a.strip()]
        if reserved:
            return [f"group_attributes names {reserved}: an attribute may not be blank, start with 'f' (the feature "
                    f"columns) or be one of {list(RESERVED_COLUMNS)}"]
        cells = int(np.prod([len(v) for v in attributes.values()]))
        if cells != self.groups:
            return [f"group_attributes has {cells} crossed cells, so groups must be {cells}, not {self.groups}"]
        return []

    @property
    def attribute_cells(self) -> tuple[list[str], list[tuple[str, ...]]]:
        """(attribute names, the values of each group's cell in group order); ([], []) without attributes."""
        if not self.group_attributes:
            return [], []
        attributes = json.loads(self.group_attributes)
        values = [[str(v) for v in vs] for vs in attributes.values()]
        return [str(a) for a in attributes], list(itertools.product(*values))

    def _floats(self, name: str) -> np.ndarray | None:
        value = getattr(self, name)
        return np.array([float(v) for v in value.split(";")]) if value else None

    @property
    def group_shares_array(self) -> np.ndarray:
        given = self._floats("group_shares")
        if given is not None:
            return given
        return np.array([1 - self.p_group, self.p_group]) if self.groups == 2 else np.full(self.groups, 1 / self.groups)

    @property
    def group_relevance_array(self) -> np.ndarray:
        given = self._floats("group_relevance")
        return given if given is not None else np.linspace(self.p_relevant_group0, self.p_relevant_group1, self.groups)

    @property
    def group_effects_array(self) -> np.ndarray:
        given = self._floats("group_effects")
        return given if given is not None else np.linspace(0.0, self.group_effect, self.groups)

    @property
    def group_label_list(self) -> list[str]:
        if self.group_labels:
            return self.group_labels.split(";")
        names, cells = self.attribute_cells
        if cells:  # display text only: the items table's attribute columns are what intersections read
            return [" · ".join(f"{a}={v}" for a, v in zip(names, cell)) for cell in cells]
        return [str(c) for c in range(self.groups)]

    @property
    def paper_groups(self) -> bool:
        """Two groups with the paper's parameters: drawn exactly as before (Bernoulli(p_group))."""
        return self.groups == 2 and not (self.group_shares or self.group_relevance or self.group_effects)

    @property
    def shuffle_requests_per_day(self) -> int:
        return int(round(self.shuffle_share * self.requests_per_day))

    @property
    def adjacent_swap_requests_per_day(self) -> int:
        return int(round(self.adjacent_swap_share * self.requests_per_day))
