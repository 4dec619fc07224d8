"""Cross-group pairwise equal-opportunity gaps A_{a>b} - A_{b>a} with query-clustered SEs.

Both accuracies are ratios over the same queries, so they are correlated; the difference's variance is
the cluster linearization of the difference: e_q = (C_q^{ab} - A_{ab} T_q^{ab}) / T^{ab} -
(C_q^{ba} - A_{ba} T_q^{ba}) / T^{ba}, var = Q/(Q-1) sum_q e_q^2 over the Q queries holding pairs of
either kind (Narasimhan et al.'s cross-group constraint, eq. 12, as an audited figure).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from fair_pipeline.audit.stats.inference import wald
from fair_pipeline.audit.stats.pairwise import _cross_counts
from fair_pipeline.audit.stats.validation import as_groups, as_labels, as_scores


def cross_group_gaps(scores, labels, sensitive_features, query_ids, *, confidence: float = 0.95) -> pd.DataFrame:
    """One row per unordered group pair (a, b): A_{a>b}, A_{b>a}, their difference with SE, CI, p-value."""
    s = as_scores(scores)
    y = as_labels(labels, s.size)
    codes, levels = as_groups(sensitive_features, s.size)
    qcode, _ = as_groups(query_ids, s.size, name="query_ids")
    G = levels.size
    C, T = _cross_counts(qcode, s, codes * 2 + y, 2 * G, better=[2 * g + 1 for g in range(G)],
                         worse=[2 * g for g in range(G)])
    rows = []
    for a, b in combinations(range(G), 2):
        Tab, Tba = T[:, a, b].sum(), T[:, b, a].sum()
        if Tab == 0 or Tba == 0:
            continue
        Aab, Aba = C[:, a, b].sum() / Tab, C[:, b, a].sum() / Tba
        e = (C[:, a, b] - Aab * T[:, a, b]) / Tab - (C[:, b, a] - Aba * T[:, b, a]) / Tba
        used = (T[:, a, b] > 0) | (T[:, b, a] > 0)
        q = int(used.sum())
        var = q / (q - 1) * float((e[used] ** 2).sum()) if q > 1 else np.nan
        w = wald(Aab - Aba, var, confidence)
        rows.append({"group_a": levels[a], "group_b": levels[b], "A_a>b": Aab, "A_b>a": Aba, "gap": Aab - Aba,
                     "se": float(w["se"]), "ci_low": float(w["ci_low"]), "ci_high": float(w["ci_high"]),
                     "p_value": float(w["p_value"]), "n_queries": q})
    return pd.DataFrame(rows)
