"""Registry side of the `benchmark_models` asset: every Adult / COMPAS fit becomes a version of
`fair-benchmark-<dataset>`, and the `champion` alias goes to the fit the rule below picks.

Champion rule (`choose_champion`, on the held-out audit rows the asset logs):

1. A fit *qualifies* when its group partial-AUC gap (Female − Male on Adult, African-American − Caucasian on
   COMPAS) is estimable and no cutoff (0.1, 0.2, 0.5, 1) shows a significant gap at familywise level 5%:
   Holm-adjusted p ≥ 0.05 at every cutoff, i.e. smallest p × number of cutoffs ≥ 0.05 (Holm rejects nothing iff
   its first step rejects nothing). Unadjusted, four looks at the same gap would call a fair model unfair far more
   often than 5% of the time (the audit corrects across groups the same way). A gap that is not estimable is never
   evidence of fairness.
2. Among qualifying fits, the least penalized wins: smallest λ (the penalty only costs accuracy, so the
   smallest λ that removes a detectable gap is the best trade-off on the grid); ties in λ (the vanilla fit
   and λ = 0, or several penalty scores) go to the higher held-out AUC, then to the earlier fit.
3. If no fit qualifies, the fit with the weakest evidence of a gap wins: the smallest maximum |z| of the gap
   over the cutoffs (every gap estimable; ties: smaller λ). Its reason says that no fit passed.
4. If no fit has an estimable gap at every cutoff, there is no champion and the alias is left where it was.

`RegistryBatch` registers and moves aliases all or nothing across datasets: if anything fails before
`commit()`, every version it created is deleted and the `candidate` / `champion` aliases it moved are put
back where they were.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from dataclasses import dataclass, field

import pandas as pd

from fair_pipeline.platform.tracking import CANDIDATE, CHAMPION, TAG_STAGE, MLflowTracking

ALPHA = 0.05
CHAMPION_RULE = (
    "least-penalized fit (smallest λ; ties: higher held-out AUC) whose held-out group partial-AUC gap is estimable and "
    f"not significant at familywise level {ALPHA:g} over the audited cutoffs (Holm-adjusted p ≥ {ALPHA:g} at every cutoff); "
    "if none qualifies, the fit with "
    "the smallest maximum |z| of the gap over the cutoffs; a non-estimable gap never qualifies"
)
TAG_PREFIX = "fair_pipeline."


@dataclass(frozen=True)
class ChampionChoice:
    """The chosen fit's position in the fit list (None: no champion), whether it passed the rule, and why."""

    index: int | None
    qualified: bool
    reason: str
    table: pd.DataFrame  # one row per fit: lam, auc, min_p_value, min_p_holm, max_abs_z, all_estimable, qualifies


def gap_table(audits: list[pd.DataFrame], lams: list[float], aucs: list[float]) -> pd.DataFrame:
    """Per fit (in order): its λ, held-out AUC, smallest gap p-value and largest |z| over cutoffs, and whether it qualifies."""
    rows = []
    for k, (audit, lam, auc) in enumerate(zip(audits, lams, aucs)):
        gaps = audit[audit["row_type"] == "gap"]
        estimable = bool(len(gaps)) and bool(gaps["estimable"].astype(bool).all()) and bool(gaps["p_value"].notna().all())
        min_p = float(gaps["p_value"].min()) if estimable else math.nan
        min_p_holm = min(1.0, min_p * len(gaps)) if estimable else math.nan  # Holm's first step
        max_z = float(gaps["z"].abs().max()) if estimable else math.nan
        rows.append({"fit": k, "lam": float(lam), "auc": float(auc), "cutoffs": len(gaps), "all_estimable": estimable,
                     "min_p_value": min_p, "min_p_holm": min_p_holm, "max_abs_z": max_z,
                     "qualifies": estimable and min_p_holm >= ALPHA})
    return pd.DataFrame(rows)


def choose_champion(audits: list[pd.DataFrame], lams: list[float], aucs: list[float]) -> ChampionChoice:
    """The benchmark champion among fits (audit rows, λ, held-out AUC per fit) by the module's rule."""
    table = gap_table(audits, lams, aucs)
    passing = table[table["qualifies"]]
    if len(passing):
        best = passing.assign(neg_auc=-passing["auc"]).sort_values(["lam", "neg_auc", "fit"], kind="stable").iloc[0]
        return ChampionChoice(int(best["fit"]), True, (
            f"smallest λ ({best['lam']:g}) whose gap is not significant at any of {int(best['cutoffs'])} cutoffs "
            f"(smallest Holm-adjusted p {best['min_p_holm']:.3g} ≥ {ALPHA:g}); {len(passing)} of {len(table)} fits qualify"), table)
    estimable = table[table["all_estimable"]]
    if len(estimable):
        best = estimable.sort_values(["max_abs_z", "lam", "fit"], kind="stable").iloc[0]
        return ChampionChoice(int(best["fit"]), False, (
            f"no fit has a non-significant gap at every cutoff; fallback: smallest maximum |z| "
            f"({best['max_abs_z']:.2f}, smallest p {best['min_p_value']:.3g}) at λ = {best['lam']:g}"), table)
    return ChampionChoice(None, False, "no fit has an estimable gap at every cutoff: no champion, alias unchanged", table)


def version_tags(dataset: str, model_kind: str, penalty_score: str, lam: float, auc: float, auc_se: float,
                 audit: pd.DataFrame, run_id: str, row: pd.Series, choice: ChampionChoice, chosen: bool) -> dict[str, str]:
    """Registered-version tags: the fit, its held-out AUC, the gap and p-value per cutoff, and the rule's verdict."""
    tags = {
        TAG_PREFIX + "dataset": dataset, TAG_PREFIX + "model": model_kind, TAG_PREFIX + "penalty_score": penalty_score,
        TAG_PREFIX + "lambda": f"{lam:g}", TAG_PREFIX + "heldout_auc": f"{auc:.6f}", TAG_PREFIX + "heldout_auc_se": f"{auc_se:.6f}",
        TAG_PREFIX + "run_id": run_id, TAG_STAGE: "benchmarks",
        TAG_PREFIX + "champion_rule_qualifies": str(bool(row["qualifies"])).lower(),
        TAG_PREFIX + "gap_min_p_value": f"{row['min_p_value']:.6g}", TAG_PREFIX + "gap_min_p_holm": f"{row['min_p_holm']:.6g}",
        TAG_PREFIX + "gap_max_abs_z": f"{row['max_abs_z']:.6g}",
    }
    for r in audit[audit["row_type"] == "gap"].itertuples():
        cutoff = f"{r.cutoff:g}"
        tags[TAG_PREFIX + "gap_groups"] = str(r.group)
        tags[f"{TAG_PREFIX}gap/{cutoff}"] = "not estimable" if not r.estimable else f"{r.auc:+.6f}"
        tags[f"{TAG_PREFIX}gap_se/{cutoff}"] = "not estimable" if not r.estimable else f"{r.se:.6f}"
        tags[f"{TAG_PREFIX}gap_p_value/{cutoff}"] = "not estimable" if not r.estimable else f"{r.p_value:.6g}"
    if chosen:
        tags.update({TAG_PREFIX + "champion_selected": "true", TAG_PREFIX + "champion_rule": CHAMPION_RULE,
                     TAG_PREFIX + "champion_reason": choice.reason})
    return tags


FINGERPRINT_TAG = TAG_PREFIX + "fingerprint"


def fingerprint(code_version: str, datasets: list[str], lambdas: list[float], penalty_scores: list[str]) -> str:
    """What determines the benchmark fits (the asset's code version and its config; the shipped data files are
    fixed by their checksums): equal fingerprints give the same models, so nothing new is registered."""
    spec = {"code_version": code_version, "datasets": sorted(datasets), "lambdas": sorted(float(x) for x in lambdas),
            "penalty_scores": sorted(penalty_scores)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def registered_fingerprint(tracking: MLflowTracking, name: str, value: str) -> list:
    """Versions of registered model `name` tagged with fingerprint `value` (hex, so safe in a filter string)."""
    if not re.fullmatch(r"[0-9a-f]+", value):
        raise ValueError(f"fingerprint {value!r} is not hex")
    client = tracking.client()
    return tracking.retry(lambda: client.search_model_versions(f"name = '{name}' and tags.`{FINGERPRINT_TAG}` = '{value}'"),
                          f"find {name} versions with fingerprint {value}")


@dataclass
class RegistryBatch:
    """Register versions and move aliases; `rollback()` undoes what this batch did (best effort, every step retried)."""

    tracking: MLflowTracking
    created: list[tuple[str, str]] = field(default_factory=list)  # (name, version)
    previous: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (name, alias) -> version before

    def _remember(self, name: str, alias: str) -> None:
        if (name, alias) not in self.previous:
            found = self.tracking.version_by_alias(name, alias)
            self.previous[(name, alias)] = None if found is None else str(found.version)

    def register(self, model_uri: str, name: str, tags: dict[str, str]):
        self._remember(name, CANDIDATE)
        version = self.tracking.register_model(model_uri, name, alias=CANDIDATE, tags=tags)
        self.created.append((name, str(version.version)))
        return version

    def set_champion(self, name: str, version: str) -> str | None:
        self._remember(name, CHAMPION)
        return self.tracking.set_champion(name, version)

    def rollback(self) -> None:
        client = self.tracking.client()
        for name, version in reversed(self.created):
            with contextlib.suppress(Exception):
                self.tracking.retry(lambda n=name, v=version: client.delete_model_version(n, v), f"roll back {name} v{version}")
        for (name, alias), version in self.previous.items():
            if version is None:
                continue
            with contextlib.suppress(Exception):
                self.tracking.retry(lambda n=name, a=alias, v=version: client.set_registered_model_alias(n, a, v),
                                    f"restore {name}@{alias} -> v{version}")


__all__ = ["ALPHA", "CHAMPION_RULE", "FINGERPRINT_TAG", "ChampionChoice", "RegistryBatch", "choose_champion", "fingerprint",
           "gap_table", "registered_fingerprint", "version_tags"]
