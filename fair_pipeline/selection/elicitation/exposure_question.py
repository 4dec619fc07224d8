"""The exposure weight mu of an elicited metric, asked of the person in the metric's own currency.

Model selection ranks by cost(rates) + mu · D, D = 1/2 Σ_{u<v} (l_u - l_v)² the exposure disparity of a ranking on
the logs (l_g: log of group g's exposure per unit of merit over the reference's; `selection.exposure`). A cost unit
means nothing to a person, so the question names a concrete exposure gap and asks what it is worth in accuracy:

    "One group gets 0.8 times the exposure per unit of merit that the others get (the four-fifths line).
     Removing that gap is worth how many percentage points of accuracy (every class, every group)?"

Lowering every rate (TPR and TNR) of every group by p points moves the overall rates by p / 100 in each class (the
group weights τ^g_i sum to 1 over g) and leaves the rate disparities unchanged, so it costs (1 - λ) Σ_i a_i · p / 100
under the elicited metric; the four-fifths gap of m groups (one group at log 0.8, the others at 0) has
D₀ = (m - 1) (log 0.8)² / 2. Equating the two gives mu = (1 - λ) Σ a · p / 100 / D₀: a ranking with that gap is
then ranked as a model p points less accurate. 0 points: exposure is reported, not weighed.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

FOUR_FIFTHS = 0.8
MAX_POINTS = 100.0


def reference_disparity(n_groups: int) -> float:
    """D of the question's gap: one of ``n_groups`` groups at ratio 0.8, the others at 1."""
    if n_groups < 2:
        raise ValueError(f"exposure parity compares groups; got {n_groups}")
    return 0.5 * (n_groups - 1) * math.log(FOUR_FIFTHS) ** 2


def accuracy_cost_per_point(metric) -> float:
    """Cost of lowering every rate of every group by one percentage point under ``metric``."""
    return (1.0 - float(metric.lam)) * float(np.sum(metric.a)) / 100.0


def parse_points(text: str) -> float:
    """The person's answer as points in [0, 100]; empty is 0; ValueError with the reason otherwise."""
    text = text.strip().rstrip("%").strip()
    if not text:
        return 0.0
    try:
        points = float(text.replace(",", "."))
    except ValueError:
        raise ValueError(f"type a number of percentage points from 0 to {MAX_POINTS:g}, not {text!r}") from None
    if not math.isfinite(points) or not 0.0 <= points <= MAX_POINTS:
        raise ValueError(f"points must lie between 0 and {MAX_POINTS:g} (a rate cannot drop further), not {text!r}")
    return points


def weight_from_points(metric, points: float) -> float:
    """mu that makes the four-fifths exposure gap cost as much as ``points`` of accuracy under ``metric``."""
    points = float(points)
    if not (math.isfinite(points) and 0.0 <= points <= MAX_POINTS):
        raise ValueError(f"points must lie between 0 and {MAX_POINTS:g}, got {points!r}")
    return accuracy_cost_per_point(metric) * points / reference_disparity(metric.n_groups)


def weight_source(points: float | None, weight: float) -> str:
    """How mu was set, for the stored metric and the report."""
    if points is None:
        return "not asked (the session has no answer to the exposure question): 0, exposure reported, not weighed"
    if points == 0:
        return "elicited: exposure gaps weigh nothing against accuracy (0 points); exposure reported, not weighed"
    return (f"elicited: a four-fifths exposure gap (one group's exposure per unit of merit {FOUR_FIFTHS:g} times the "
            f"others') weighs as much as {points:g} points of accuracy in every class and group (mu = {weight:.4g})")


def with_exposure_answer(metric, points: float | None):
    """``metric`` carrying the weight of the person's answer (None: not asked, weight 0) and how it was set."""
    weight = 0.0 if points is None else weight_from_points(metric, points)
    return dataclasses.replace(metric, exposure_weight=weight, exposure_weight_source=weight_source(points, weight))


def question_text(metric, group_labels) -> str:
    """The screen of the exposure question (after the comparisons: it is priced with the elicited metric)."""
    names = ", ".join(str(g) for g in group_labels)
    unpriced = accuracy_cost_per_point(metric) <= 0
    lines = [
        "Exposure on the logs: how much attention a ranking gives each group per unit of its merit "
        "(1 = in proportion to merit).",
        f"Suppose a ranking gives one of the groups ({names}) {FOUR_FIFTHS:g} times the exposure per unit of merit "
        "that the others get (the four-fifths line).",
        "Removing that gap is worth how many percentage points of accuracy (every TPR and TNR, in every group)?",
        "Type a number from 0 to 100 (0 or Enter: exposure is reported but does not change which model wins).",
    ]
    if unpriced:
        lines.append("Note: your answers give errors no weight (lambda = 1), so any number here gives mu = 0; "
                     "state a weight with the elicited_metric asset's exposure_weight instead.")
    return "\n".join(lines)


PROMPT = "Points of accuracy for the four-fifths exposure gap? (q = stop, resume later) "
