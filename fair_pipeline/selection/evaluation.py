"""Model selection on held-out rows (glue, no Dagster): the inputs of partition D (the elicited metric, the
rankers and transforms of D, the held-out labelled rows of day D), every candidate's group-wise rates, and the
ranking by the metric with each candidate's paired difference vs the winner clustered by item.

`compute_model_selection` is what the `model_selection` asset runs; errors name what is missing
(`SelectionInputError`, LookupError, and the upstream stages' input errors).
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd

from fair_pipeline.audit import sql as aw
from fair_pipeline.eo import store as eo_store
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.platform.engines import DuckDBEngine
from fair_pipeline.platform.sql_models import SQL_PARAMETERS
from fair_pipeline.position_bias.store import load_chosen_position_bias
from fair_pipeline.selection import candidates as sc
from fair_pipeline.selection import families as fam
from fair_pipeline.selection import family_data
from fair_pipeline.selection.elicitation import rank_candidates
from fair_pipeline.selection.elicitation.paired import MIN_DISAGREEING
from fair_pipeline.selection.exposure import candidate_exposure, held_out_parts, weigh_exposure, with_exposure
from fair_pipeline.selection.store import load_latest_metric

RANKING_COLUMNS = ["rank", "model", "family", "setting", "lam", "alpha", "cost", "cost_se", "ci_low", "ci_high", "diff_vs_winner", "diff_se",
                   "diff_ci_low", "diff_ci_high", "diff_p", "diff_df", "diff_disagreeing", "cost_se_clustered", "error_part", "violation_part",
                   "threshold", "min_group_count", "paired_clusters", "paired_rows", "held_out", "estimable", "reason"]
INTERVALS_NOTE = (
    "cost_se / ci_low / ci_high: the candidate's own cost, marginal delta-method CI from binomial group counts "
    "(every impression independent). diff_vs_winner / diff_se / diff_ci_low / diff_ci_high / diff_p: paired "
    "difference cost(candidate) - cost(winner) on the same held-out rows, clustered by item (influence-function "
    "SE incl. the selection-rate threshold; CI and p two-sided for equal cost, Student t at diff_df degrees of "
    f"freedom; NaN when the two decide differently on fewer than {MIN_DISAGREEING} items, diff_disagreeing, a "
    "difference too few items hold for an interval); cost_se_clustered: the candidate's own "
    "cost SE clustered by item. When the metric weighs exposure (mu > 0), cost is cost + mu x exposure_disparity "
    "and cost_se / ci_low / ci_high / cost_se_clustered are the total's: the rates' and the exposure's influence "
    "joined by item (two-way with the logged requests), Student t. Compare candidates with the paired difference.")


def selection_label_source(name: str, landing, day=None) -> str:
    if name == "auto":
        return "randomized_relevance" if aw.truth_path(landing, day).exists() else "randomized_clicks"
    return name


def evaluation_inputs(con, config, landing, day, marts=None):
    """(metric row, metric, candidates, held-out item counts, window, label source) of asset partition `day`: its
    rankers and transform, evaluated on day `day`; errors name what is missing. The logs are read from `marts` (the
    warehouse engine; default: DuckDB over `con`), the stored results from `con`."""
    marts = marts if marts is not None else DuckDBEngine(con)
    metric, metric_info = load_latest_metric(con)
    rankers = sc.load_rankers(con, day)
    stored = eo_store.load_latest_transforms(con, day)["weighted"]
    # The re-fits copy the stored transform's settings; the defaults when it was not estimable (each re-fit
    # then decides for itself whether its groups have enough clicks).
    template = stored.transform if stored.estimable else WeightedCDFTransformer()
    label = selection_label_source(config.label_source, landing, day)
    window = aw.partition_evaluation_window(marts, label, config.window_days, day)
    source = aw.label_source(label, landing, window, config.randomized_policies)
    items = aw.item_counts(marts, source, sorted({f for r in rankers for f in r.features}))
    if items.empty:
        raise sc.SelectionInputError(f"{label}: no labelled rows in {window.label}")
    candidates = sc.build_candidates(con, rankers, config.alphas, load_chosen_position_bias(con, day), template,
                                     float(SQL_PARAMETERS["eo_score_bin_width"]), config.min_positives, marts, day)
    return metric, metric_info, candidates, items, window, source


def rank(rates: pd.DataFrame, metric, labels: list[str], config, source, window,
         items: pd.DataFrame | None = None, scores: dict | None = None, decisions: dict | None = None) -> pd.DataFrame:
    """rank_candidates on the long rates, keeping each candidate's own reason and adding per-group columns;
    with the held-out item rows and every candidate's scores on them, the paired differences to the winner
    clustered by item (columns paired_clusters / paired_rows: items and rows behind them)."""
    unknown = sorted(set(rates["group"]) - set(labels))  # a metric group absent from the data: not estimable
    if unknown:
        raise sc.SelectionInputError(f"the held-out data has groups {unknown} that the elicited metric (groups "
                                     f"{labels}) does not weigh; re-elicit with matching group_labels")
    ranking = rank_candidates(rates.drop(columns=["selected_share"]), metric, groups=labels, min_count=config.min_count,
                              confidence=config.confidence, held_out=items, scores=scores,
                              selection_rate=config.selection_rate, cluster_col="item_id", decisions=decisions)
    ranking["paired_clusters"] = ranking.attrs.get("n_clusters", np.nan)
    ranking["paired_rows"] = ranking.attrs.get("n_rows", np.nan)
    own = ranking["candidate_reason"].astype(str)
    ranking["reason"] = np.where(own != "", own, ranking["reason"])
    wide = rates.pivot(index="candidate", columns="group", values=["tpr", "tnr", "n_pos", "n_neg"])
    wide.columns = [f"{stat}[{group}]" for stat, group in wide.columns]
    ranking = ranking.merge(wide, left_on="candidate", right_index=True, how="left")
    by_source = source.view == aw.RANDOMIZED_VIEW  # day D's randomized requests: every fit is on earlier days
    ranking["held_out"] = by_source or ranking["trained_through"].map(lambda d: str(d) < str(window.first))
    ranking = ranking.rename(columns={"candidate": "model"}).drop(columns=["candidate_reason"])
    first = [c for c in RANKING_COLUMNS if c in ranking.columns]
    return ranking[first + [c for c in ranking.columns if c not in first]]


@dataclasses.dataclass
class Selection:
    """What `compute_model_selection` found for partition D."""

    metric: object
    info: dict  # the elicitation's marts.elicited_metrics row
    candidates: list
    items: pd.DataFrame
    window: object
    source: object
    rates: pd.DataFrame
    ranking: pd.DataFrame
    families_cpu: float  # CPU seconds of the families' fits and rates
    exposure_note: str = ""  # which candidates' exposure parity on the logs could not be computed, or ""

    @property
    def estimable(self) -> pd.DataFrame:
        return self.ranking[self.ranking["estimable"].astype(bool)]

    @property
    def best(self) -> str | None:
        return self.estimable.iloc[0]["model"] if not self.estimable.empty else None

    @property
    def winner(self):
        """The best candidate that is a ranker + EO transform pyfunc (fair-ranker registers ranking models only: a
        post-processor or the pairwise-fair ranker may rank first), or None."""
        by_name = {c.name: c for c in self.candidates}
        registrable = [name for name in self.estimable["model"] if name in by_name]
        return by_name[registrable[0]] if registrable else None


def check_config(config) -> None:
    if not 0.0 < config.selection_rate <= 1.0:
        raise sc.SelectionInputError(f"selection_rate={config.selection_rate!r} must be in (0, 1]")
    unknown = sorted(set(config.families) - set(fam.NEW_FAMILIES))
    if unknown:
        raise sc.SelectionInputError(f"families {unknown} are not among {list(fam.NEW_FAMILIES)}")


def compute_model_selection(con, marts, config, landing, day) -> Selection:
    """Every candidate of partition `day` (rankers x EO relaxations, and the `families`) evaluated on the held-out
    rows and ranked by the elicited metric."""
    check_config(config)
    metric, info, candidates, items, window, source = evaluation_inputs(con, config, landing, day, marts)
    started = time.process_time()
    families = family_data.build_family_candidates(
        marts, list({c.ranker.candidate_id: c.ranker for c in candidates}.values()),
        label=selection_label_source(config.label_source, landing, day), landing=landing,
        policies=config.randomized_policies, position_curve=load_chosen_position_bias(con, day),
        selection_rate=config.selection_rate, families=config.families, day=day)
    families_cpu = time.process_time() - started
    rates = sc.candidate_rates(candidates, items, config.selection_rate)
    scores = sc.candidate_scores(candidates, items, rates.loc[rates["candidate_reason"] == "", "candidate"].unique())
    started = time.process_time()
    rates, scores, decisions = fam.add_families(rates, scores, families, items, config.selection_rate)
    families_cpu += time.process_time() - started  # fits + rates of the new families (the benchmark times the rest)
    ranking = rank(rates, metric, list(info["group_labels"]), config, source, window, items, scores, decisions)
    exposure, note, disparities = candidate_exposure(marts, window, load_chosen_position_bias(con, day),
                                                     [*candidates, *families], keep_totals=metric.exposure_weight > 0)
    held = None
    if metric.exposure_weight > 0:  # the totals' paired differences join the held-out rows and the logs by item
        names = ranking.loc[ranking["estimable"].astype(bool), "model"].tolist()
        held = held_out_parts(metric, items, list(info["group_labels"]), names, scores, decisions, rates,
                              config.selection_rate, disparities)
    ranking = weigh_exposure(with_exposure(ranking, exposure), exposure, metric.exposure_weight, config.confidence,
                             held_out=held)
    return Selection(metric, info, candidates, items, window, source, rates, ranking, families_cpu, note)
