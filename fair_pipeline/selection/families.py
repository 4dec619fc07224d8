"""Model-selection candidates of every fairness family, next to "retrained ranker + EO transform".

Families (the `family` column of the ranking):
  mi_penalty               a retrained MI-penalized ranker as is (candidates.py, alpha = 0); relaxation: lambda
  eo_transform             that ranker + its re-fitted EO transform (candidates.py, alpha > 0); relaxation: alpha
  threshold_postprocessor  Hardt et al.'s derived predictor on the base ranker's score (ThresholdPostProcessor),
                           relaxation: the constraint (equal_opportunity, then equalized_odds)
  reject_option            Kamiran et al.'s reject option on the base ranker's probability (RejectOptionClassifier),
                           relaxation: the fairness bound under which its margin is picked from its margin grid
  pairwise_fair            a linear ranker trained on within-request click pairs under cross-group pairwise equal
                           opportunity (PairwiseFairRanker), relaxation: the slack (None = unconstrained)

The base ranker of the post-processors is the least penalized retrained ranker: post-processing is the
alternative to a penalty in training, so it starts from the ranker without one (the smallest lambda).

Same budget. Every ranker candidate selects the top `selection_rate` share of the held-out examples; the
post-processors are held to the same budget where they are fitted: the derived predictor's LP fixes its expected
selection rate to `selection_rate` on the fit rows, the reject option's threshold is the base score's
`selection_rate` quantile on the fit rows (its critical region then moves decisions by group around it). On the
held-out day their share is close to, not exactly, that rate (`selected_share` of the rates shows it).

Interface. A score candidate (pairwise_fair) is rated like the ranker candidates (threshold at the held-out
selection-rate quantile; its estimation enters the paired SEs). A decision candidate (the post-processors) gives
each held-out row its probability of a positive decision; its rates are expected rates and its rule, fitted on
other days, is fixed (`rank_candidates(..., decisions=)`, elicitation/paired.py). Pure numpy / pandas / sklearn:
the fit rows come from `family_data` (DuckDB glue).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from fair_pipeline.postprocessing import PostProcessingInputError, RejectOptionClassifier, ThresholdPostProcessor
from fair_pipeline.selection.elicitation.operating_point import group_rates, selection_threshold
from fair_pipeline.training.pairwise_fair import PairwiseFairnessError, PairwiseFairRanker

EXISTING_FAMILIES = ("eo_transform", "mi_penalty")
NEW_FAMILIES = ("threshold_postprocessor", "reject_option", "pairwise_fair")
FAMILIES = EXISTING_FAMILIES + NEW_FAMILIES
DECIDING_FAMILIES = ("threshold_postprocessor", "reject_option")

POSTPROCESSOR_CONSTRAINTS = ("equal_opportunity", "equalized_odds")  # loosest first
REJECT_OPTION_BOUNDS = (0.10, 0.05, 0.02)  # |TPR(unprivileged) - TPR(privileged)| <= bound on the fit rows
PAIRWISE_SLACKS = (None, 0.10, 0.05, 0.02)  # None: the same optimizer without a constraint
# Pair budget of the daily fit: steps x cells x pairs_per_step pair differences, whatever the log size.
PAIRWISE_BUDGET = {"n_iter": 300, "pairs_per_step": 256, "eval_pairs": 4000, "n_snapshots": 30, "learning_rate": 0.05}


@dataclasses.dataclass(frozen=True)
class ClickPairs:
    """Observational request rows for the pairwise-fair ranker: a request is a query, a click the better item."""

    X: np.ndarray
    clicked: np.ndarray
    groups: np.ndarray
    request_ids: np.ndarray
    weight: np.ndarray  # 1 / w_position for clicked rows (inverse propensity), 1 for the others
    window: str


@dataclasses.dataclass(frozen=True)
class FamilyCandidate:
    """One fitted member of a new family; `model` None when it could not be fitted (`reason`)."""

    family: str
    setting: str
    base: object  # candidates.Ranker: scored by the post-processors; features and window of the pairwise ranker
    model: object | None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.family}/{self.setting}" if self.family == "pairwise_fair" else \
            f"{self.family}/{self.base.candidate_id}/{self.setting}"

    @property
    def decides(self) -> bool:
        return self.family in DECIDING_FAMILIES

    def score(self, items: pd.DataFrame) -> np.ndarray:
        """pairwise_fair: the ranking score of item rows (features)."""
        return self.model.score(items[list(self.base.features)].to_numpy(dtype=np.float64))

    def decisions(self, items: pd.DataFrame) -> np.ndarray:
        """Post-processors: probability of a positive decision of item rows (features + `group`)."""
        groups = items["group"].astype(str).to_numpy(dtype=object)
        base = self.base.score(items)
        if self.family == "threshold_postprocessor":
            return self.model.predict_expected(base, sensitive_features=groups)
        return self.model.predict(probability(base), sensitive_features=groups).astype(float)


def probability(score: np.ndarray) -> np.ndarray:
    """The base ranker's logistic score as a probability (the reject option's grid is on [0, 1])."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(score, dtype=float)))


def weighted_rows(score: np.ndarray, items: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scores, labels, groups, weights): each item's score once as a positive of weight n_pos and once as a
    negative of weight n_neg, zero-weight rows left out. Two rows per item, however many impressions it has."""
    pos, neg = items["n_pos"].to_numpy(dtype=np.float64), items["n_neg"].to_numpy(dtype=np.float64)
    groups = items["group"].astype(str).to_numpy(dtype=object)
    weights = np.r_[pos, neg]
    keep = weights != 0  # a NaN or negative count stays, for the fit to reject by name
    return (np.r_[score, score][keep], np.r_[np.ones(pos.size, dtype=int), np.zeros(neg.size, dtype=int)][keep],
            np.r_[groups, groups][keep], weights[keep])


def fit_postprocessors(base, fit_items: pd.DataFrame, selection_rate: float, families) -> list[FamilyCandidate]:
    """The threshold post-processor and reject option members fitted on `fit_items` (group, n_pos, n_neg and the
    base ranker's features: labelled rows of days before the evaluated one), weighted by the counts."""
    out = []
    score = base.score(fit_items)
    scores, labels, groups, weights = weighted_rows(score, fit_items)
    if "threshold_postprocessor" in families:
        for constraint in POSTPROCESSOR_CONSTRAINTS:
            out.append(_fitted("threshold_postprocessor", f"constraint={constraint}", base, lambda c=constraint:
                               ThresholdPostProcessor(constraint=c, selection_rate=selection_rate)
                               .fit(scores, labels, sensitive_features=groups, sample_weight=weights)))
    if "reject_option" in families:
        cut = float(probability(selection_threshold(fit_items[["group", "n_pos", "n_neg"]].assign(score=score),
                                                    selection_rate)))
        for bound in REJECT_OPTION_BOUNDS:
            out.append(_fitted("reject_option", f"bound={bound:g}", base, lambda b=bound:
                               RejectOptionClassifier(threshold=cut, metric="equal_opportunity", bound=b)
                               .fit(probability(scores), labels, sensitive_features=groups,
                                    sample_weight=weights)))
    return out


def fit_pairwise(base, pairs: ClickPairs, random_state: int = 0) -> list[FamilyCandidate]:
    """PairwiseFairRanker over the slack grid, on the base ranker's features and window (`pairs`)."""
    return [_fitted("pairwise_fair", f"slack={'none' if slack is None else f'{slack:g}'}", base, lambda s=slack:
                    PairwiseFairRanker(constraint=None if s is None else "cross_group_equal_opportunity",
                                       slack=0.0 if s is None else s, random_state=random_state, **PAIRWISE_BUDGET)
                    .fit(pairs.X, pairs.clicked, sensitive_features=pairs.groups, query_ids=pairs.request_ids,
                         sample_weight=pairs.weight))
            for slack in PAIRWISE_SLACKS]


def unfitted(family: str, base, reason: str) -> list[FamilyCandidate]:
    """The members of a family that has no fit rows, each with the reason (ranked as not estimable)."""
    settings = {"threshold_postprocessor": [f"constraint={c}" for c in POSTPROCESSOR_CONSTRAINTS],
                "reject_option": [f"bound={b:g}" for b in REJECT_OPTION_BOUNDS],
                "pairwise_fair": [f"slack={'none' if s is None else f'{s:g}'}" for s in PAIRWISE_SLACKS]}[family]
    return [FamilyCandidate(family, s, base, None, reason) for s in settings]


def _fitted(family, setting, base, fit) -> FamilyCandidate:
    try:
        return FamilyCandidate(family, setting, base, fit())
    except (PostProcessingInputError, PairwiseFairnessError) as error:  # e.g. a group without positives
        return FamilyCandidate(family, setting, base, None, f"{family} fit failed: {error}")


def expected_group_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per group: expected tpr / tnr / selected share of decisions with probability `decision` (group, n_pos,
    n_neg, decision), with n_pos / n_neg (NaN rate when a class is absent)."""
    d = frame["decision"].to_numpy(dtype=float)
    parts = frame.assign(tp=d * frame["n_pos"], tn=(1.0 - d) * frame["n_neg"], sel=d * (frame["n_pos"] + frame["n_neg"]))
    g = parts.groupby("group", sort=True)[["tp", "tn", "sel", "n_pos", "n_neg"]].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "group": g.index.astype(str),
            "tpr": np.where(g["n_pos"] > 0, g["tp"] / g["n_pos"], np.nan),
            "tnr": np.where(g["n_neg"] > 0, g["tn"] / g["n_neg"], np.nan),
            "n_pos": g["n_pos"].to_numpy(dtype=np.int64), "n_neg": g["n_neg"].to_numpy(dtype=np.int64),
            "selected_share": g["sel"] / (g["n_pos"] + g["n_neg"]),
        }).reset_index(drop=True)


def family_rates(candidates: list[FamilyCandidate], items: pd.DataFrame, selection_rate: float
                 ) -> tuple[pd.DataFrame, dict, dict]:
    """(long rates table candidate x group with the columns of candidates.candidate_rates plus family and
    setting, scores of the score candidates, decision probabilities of the deciding ones) on held-out `items`."""
    groups = sorted(items["group"].astype(str).unique())
    rows, scores, decisions = [], {}, {}
    for cand in candidates:
        base = {"candidate": cand.name, "family": cand.family, "setting": cand.setting,
                "ranker": cand.base.candidate_id, "lam": cand.base.lam if cand.family != "pairwise_fair" else np.nan,
                "alpha": np.nan, "trained_through": str(cand.base.window_end)}
        reason, threshold = cand.reason, np.nan
        if not reason:
            try:
                frame = items[["group", "n_pos", "n_neg"]]
                if cand.decides:
                    decision = np.asarray(cand.decisions(items), dtype=float)
                    rates = expected_group_rates(frame.assign(decision=decision))
                else:
                    score = np.asarray(cand.score(items), dtype=float)
                    threshold = selection_threshold(frame.assign(score=score), selection_rate)
                    rates = group_rates(frame.assign(score=score), threshold)
            except (PostProcessingInputError, PairwiseFairnessError, ValueError) as error:
                reason = f"cannot decide on the held-out rows: {error}"
        if reason:
            rows.extend({**base, "group": g, "tpr": np.nan, "tnr": np.nan, "n_pos": np.nan, "n_neg": np.nan,
                         "selected_share": np.nan, "threshold": np.nan, "candidate_reason": reason} for g in groups)
            continue
        (decisions if cand.decides else scores)[cand.name] = decision if cand.decides else score
        rows.extend({**base, **r, "threshold": threshold, "candidate_reason": ""} for r in rates.to_dict("records"))
    return pd.DataFrame(rows), scores, decisions


def with_family(rates: pd.DataFrame) -> pd.DataFrame:
    """The ranker candidates' rates (candidates.candidate_rates) with their family and setting."""
    alpha = rates["alpha"].to_numpy(dtype=float)
    return rates.assign(family=np.where(alpha == 0, "mi_penalty", "eo_transform"),
                        setting=[f"lam={lam:g},alpha={a:g}" for lam, a in zip(rates["lam"], alpha)])


def add_families(rates: pd.DataFrame, scores: dict, candidates: list[FamilyCandidate], items: pd.DataFrame,
                 selection_rate: float) -> tuple[pd.DataFrame, dict, dict]:
    """All candidates' rates (family column set), scores and decision probabilities, for `rank`."""
    extra, extra_scores, decisions = family_rates(candidates, items, selection_rate)
    frames = [f for f in (with_family(rates), extra) if not f.empty]
    return pd.concat(frames, ignore_index=True), {**scores, **extra_scores}, decisions


def winning_family(ranking: pd.DataFrame) -> str | None:
    """The family of the best estimable candidate of a ranking (None when none is estimable)."""
    best = ranking[ranking["estimable"].astype(bool)]
    return None if best.empty else str(best.iloc[0]["family"])
