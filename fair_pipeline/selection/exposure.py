"""Each model-selection candidate's exposure parity on the logged requests, as columns of the ranking (glue).

Every candidate (retrained ranker x EO relaxation, pairwise-fair ranker, post-processors) re-ranks the shown items
of a bounded sample of the evaluation window's logged production requests (`audit.exposure_offpolicy`); its
exposure per unit of merit of each group over the reference group's (the largest) becomes the ranking's columns
`exposure_ratio[g]`, `exposure_ratio_ci_low[g]`, `exposure_ratio_ci_high[g]`, and `exposure_ratio_worst` (with
its CI and `exposure_ratio_worst_group`: the group whose ratio is farthest from 1 on the log scale), so an elicited
metric or a reader of `marts.model_ranking` can weigh exposure. A post-processor decides rather than ranks: its
ranking orders items by the probability of a positive decision, ties by the base ranker's score.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fair_pipeline.audit import exposure_offpolicy as offpolicy
from fair_pipeline.audit.sql import AuditDataError

EXPOSURE_NOTE = ("exposure_ratio[g]: exposure per unit of merit of group g over the reference group's when the "
                 "candidate re-ranks the shown items of the logged production requests (off-policy, from the logs; "
                 "1 = proportional), 95% CI two-way clustered by item and request; exposure_ratio_worst: the group "
                 "farthest from 1.")


def _scorer(candidate):
    if getattr(candidate, "decides", False):  # decisions first, the base ranker's score among equal decisions
        return lambda rows: (np.asarray(candidate.decisions(rows), dtype=float), candidate.base.score(rows))
    return lambda rows: np.asarray(candidate.score(rows), dtype=float)


def candidate_exposure(marts, window, curve: pd.DataFrame, candidates, max_requests: int = offpolicy.DEFAULT_MAX_REQUESTS
                       ) -> tuple[pd.DataFrame, str]:
    """(candidate x group rows: candidate, group, reference, ratio, ci_low, ci_high, verdict, note; a note naming
    what could not be computed) for the candidates that have a fitted model."""
    usable = [c for c in candidates if getattr(c, "transform", True) is not None and getattr(c, "model", True) is not None]
    if not usable:
        return pd.DataFrame(), ""
    features = sorted({f for c in usable for f in (c.ranker.features if hasattr(c, "ranker") else c.base.features)})
    try:
        rows, _ = offpolicy.sampled_requests(marts, window, features, max_requests)
    except AuditDataError as error:
        return pd.DataFrame(), f"exposure of the candidates not computed: {error}"
    if rows.empty:
        return pd.DataFrame(), f"exposure of the candidates not computed: no logged production request in {window.label}"
    found = offpolicy.offpolicy_exposure(rows, {c.name: _scorer(c) for c in usable}, curve)
    frames, notes = [], []
    for name, result in found.items():
        if isinstance(result, str):
            notes.append(result)
            continue
        frames.append(result.pairs[["group", "reference", "ratio", "ci_low", "ci_high", "verdict", "note"]]
                      .assign(candidate=name))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), "; ".join(notes)


def with_exposure(ranking: pd.DataFrame, exposure: pd.DataFrame) -> pd.DataFrame:
    """The ranking with each candidate's exposure columns (NaN for a candidate without them)."""
    if exposure.empty:
        return ranking.assign(exposure_ratio_worst=np.nan)
    wide = exposure.pivot(index="candidate", columns="group", values=["ratio", "ci_low", "ci_high"])
    wide.columns = [f"exposure_{'ratio' if stat == 'ratio' else 'ratio_' + stat}[{group}]" for stat, group in wide.columns]
    scale = np.abs(np.log(exposure["ratio"].where(exposure["ratio"] > 0)))
    worst = exposure.assign(distance=scale.fillna(-1.0)).sort_values(["candidate", "distance"], ascending=[True, False])
    worst = worst.drop_duplicates("candidate").set_index("candidate")
    wide["exposure_ratio_worst"] = worst["ratio"]
    wide["exposure_ratio_worst_ci_low"] = worst["ci_low"]
    wide["exposure_ratio_worst_ci_high"] = worst["ci_high"]
    wide["exposure_ratio_worst_group"] = worst["group"].astype(str)
    wide["exposure_reference"] = worst["reference"].astype(str)
    return ranking.merge(wide, left_on="model", right_index=True, how="left")
