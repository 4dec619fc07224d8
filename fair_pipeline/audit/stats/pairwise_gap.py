"""Pairwise equal-opportunity gaps with query-clustered SEs: cross-group A_{a>b} - A_{b>a}, marginal A_{a>:} - A_{b>:}.

Both accuracies are ratios over the same queries, so they are correlated; the difference's variance is
the cluster linearization of the difference: e_q = (C_q^{ab} - A_{ab} T_q^{ab}) / T^{ab} -
(C_q^{ba} - A_{ba} T_q^{ba}) / T^{ba}, var = Q/(Q-1) sum_q e_q^2 over the Q queries holding pairs of
either kind (Narasimhan et al.'s cross-group constraint, eq. 12, as an audited figure). The marginal
gap pools the worse item's group (eq. 2) and is linearized the same way. Both tables end with the effect (the gap)
and its CI, the practical margin δ (``pairwise_accuracy``), the TOST p and a verdict (`audit.stats.equivalence`).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.equivalence import add_equivalence
from fair_pipeline.audit.stats.inference import wald
from fair_pipeline.audit.stats.pairwise import _cross_counts
from fair_pipeline.audit.stats.validation import as_groups, as_labels, as_scores


def _difference(C1, T1, C2, T2, confidence):
    """A1 - A2 for two ratios over the same queries (rows of C, T), with the cluster linearization SE."""
    t1, t2 = T1.sum(), T2.sum()
    A1, A2 = C1.sum() / t1, C2.sum() / t2
    e = (C1 - A1 * T1) / t1 - (C2 - A2 * T2) / t2
    used = (T1 > 0) | (T2 > 0)
    q = int(used.sum())
    var = q / (q - 1) * float((e[used] ** 2).sum()) if q > 1 else np.nan
    w = wald(A1 - A2, var, confidence)
    return A1, A2, {"gap": A1 - A2, "se": float(w["se"]), "ci_low": float(w["ci_low"]),
                    "ci_high": float(w["ci_high"]), "p_value": float(w["p_value"]), "n_queries": q}


def _counts(scores, labels, sensitive_features, query_ids):
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    qcode, _ = as_groups(query_ids, s.size, name="query_ids")
    G = levels.size
    C, T = _cross_counts(qcode, s, codes * 2 + y, 2 * G, better=[2 * g + 1 for g in range(G)],
                         worse=[2 * g for g in range(G)])
    return C, T, levels


def marginal_gaps(scores, labels, sensitive_features, query_ids, *, confidence: float = 0.95,
                  margins=None) -> pd.DataFrame:
    """One row per unordered group pair (a, b): A_{a>:}, A_{b>:} (group of the better item), difference, SE, CI."""
    C, T, levels = _counts(scores, labels, sensitive_features, query_ids)
    Cm, Tm = C.sum(axis=2), T.sum(axis=2)
    rows = []
    for a, b in combinations(range(levels.size), 2):
        if Tm[:, a].sum() == 0 or Tm[:, b].sum() == 0:
            continue
        A1, A2, d = _difference(Cm[:, a], Tm[:, a], Cm[:, b], Tm[:, b], confidence)
        rows.append({"group_a": levels[a], "group_b": levels[b], "A_a>:": A1, "A_b>:": A2, **d})
    return add_equivalence(pd.DataFrame(rows), "pairwise_accuracy", "gap", "se", margins=margins,
                           confidence=confidence, p_adjusted=None)


def cross_group_gaps(scores, labels, sensitive_features, query_ids, *, confidence: float = 0.95,
                     margins=None) -> pd.DataFrame:
    """One row per unordered group pair (a, b): A_{a>b}, A_{b>a}, their difference with SE, CI, p-value."""
    C, T, levels = _counts(scores, labels, sensitive_features, query_ids)
    rows = []
    for a, b in combinations(range(levels.size), 2):
        if T[:, a, b].sum() == 0 or T[:, b, a].sum() == 0:
            continue
        A1, A2, d = _difference(C[:, a, b], T[:, a, b], C[:, b, a], T[:, b, a], confidence)
        rows.append({"group_a": levels[a], "group_b": levels[b], "A_a>b": A1, "A_b>a": A2, **d})
    return add_equivalence(pd.DataFrame(rows), "pairwise_accuracy", "gap", "se", margins=margins,
                           confidence=confidence, p_adjusted=None)
