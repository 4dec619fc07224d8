"""The day's candidates as rate profiles, for `fair-pipeline elicit --partition D`: the per-group (TPR, TNR) that
model_selection stored in `marts.model_ranking` (columns `tpr[<group>]`, `tnr[<group>]`, each at the candidate's own
selection-rate threshold) are exactly what an elicited metric is evaluated on, so an elicitation that stops when
their order is settled asks only what the choice among them needs."""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd

from fair_pipeline.platform.partition_store import resolve_partition
from fair_pipeline.platform.warehouse import session
from fair_pipeline.selection.store import MODEL_RANKING, load_ranking

HINT = "materialize the model_selection asset for that partition (fair-pipeline backfill)"
RATE_NAMES = ("tpr", "tnr")  # class i of a profile is r_i = P(h = i | Y = i): TPR, TNR


class CandidateProfilesError(ValueError):
    """The partition has no candidates with rates, or their groups do not match the elicitation's."""


@dataclasses.dataclass(frozen=True)
class CandidateProfiles:
    partition: dt.date
    names: tuple[str, ...]
    group_labels: tuple[str, ...]
    profiles: np.ndarray  # (n, groups, 2): TPR, TNR per group
    left_out: tuple[str, ...]  # candidates without a rate in every group (not estimable)


def ranking_groups(ranking: pd.DataFrame) -> list[str]:
    """The group labels of a stored ranking, from its `tpr[<group>]` columns (a label may hold any character)."""
    return [c[len("tpr["):-1] for c in ranking.columns
            if isinstance(c, str) and c.startswith("tpr[") and c.endswith("]") and f"tnr[{c[4:-1]}]" in ranking.columns]


def candidate_profiles(ranking: pd.DataFrame, partition: dt.date,
                       group_labels: tuple[str, ...] | None = None) -> CandidateProfiles:
    """Profiles of the ranking's candidates in the order of `group_labels` (default: the ranking's groups)."""
    stored = ranking_groups(ranking)
    where = f"{MODEL_RANKING} partition {partition}"
    if ranking.empty or not stored:
        raise CandidateProfilesError(f"{where} has no candidates with group-wise rates")
    labels = tuple(stored) if group_labels is None else tuple(group_labels)
    if len(labels) != len(stored):
        raise CandidateProfilesError(f"{where} has {len(stored)} groups {stored} but the elicitation asks for "
                                     f"{len(labels)}; use --groups {len(stored)} (or leave it out)")
    if set(labels) != set(stored):
        raise CandidateProfilesError(f"--group-labels {list(labels)} do not name the groups of {where}: {stored}")
    columns = [f"{rate}[{label}]" for label in labels for rate in RATE_NAMES]
    values = ranking[columns].to_numpy(dtype=float).reshape(len(ranking), len(labels), len(RATE_NAMES))
    complete = np.isfinite(values).all(axis=(1, 2))
    names = ranking["model"].astype(str).to_numpy()
    if not complete.any():
        raise CandidateProfilesError(f"{where}: no candidate has rates in every group, so there is no order to "
                                     f"settle ({len(ranking)} candidates, none estimable)")
    return CandidateProfiles(partition, tuple(names[complete]), labels, values[complete], tuple(names[~complete]))


def load_candidate_profiles(warehouse: Path, partition: str | None,
                            group_labels: tuple[str, ...] | None = None) -> CandidateProfiles:
    """Read partition `partition` (None: the newest stored) of marts.model_ranking, read-only."""
    if not Path(warehouse).is_file():
        raise CandidateProfilesError(f"no warehouse at {warehouse}: this home has no model_selection results "
                                     "(run `fair-pipeline run` first, or set FAIR_PIPELINE_HOME)")
    with session(Path(warehouse), read_only=True) as con:
        try:
            day = resolve_partition(con, MODEL_RANKING, partition, hint=HINT)
            ranking = load_ranking(con, day)
        except LookupError as error:
            raise CandidateProfilesError(str(error)) from error
    return candidate_profiles(ranking, day, group_labels)
