"""Exposure parity of ZOZOTOWN's production policy (Bernoulli Thompson Sampling) on the three shipped Open Bandit
campaigns, with the pipeline's own estimators, from the shipped files.

Per campaign: the examination curve from the campaign's Uniform Random log (`position_bias` "randomized":
click-through rate of each slot over slot 1's; items are placed uniformly at random, so the ratio is the
examination ratio), then `exposure_parity` of the campaign's BTS log over the whole week: groups are the
stand-in item groups of `datasets.open_bandit` (item_feature_0 above / at-or-below the campaign's median), CIs
two-way clustered by item and request, the curve's SEs entering by the delta-method bound. The random and BTS logs
are separate traffic, so the curve is independent of the audited clicks.

Run ``python -m fair_pipeline.reproductions.open_bandit_exposure`` (a markdown table; docs/exposure.md shows it).
"""
from __future__ import annotations

import sys

import pandas as pd

from fair_pipeline.audit.stats.exposure import ExposureParity, exposure_parity
from fair_pipeline.datasets.open_bandit import CAMPAIGNS, impressions_and_extras, items_table
from fair_pipeline.position_bias.aggregates import aggregate_score_bins
from fair_pipeline.position_bias.estimators import estimate_from_aggregates


def campaign_curve(campaign: str, root=None) -> pd.DataFrame:
    """The randomized position-bias curve (position, weight, se, ...) of a campaign's Uniform Random log."""
    random, _ = impressions_and_extras("random", items_table(root, campaign), root, campaign)
    return estimate_from_aggregates("randomized", aggregate_score_bins(random))


def campaign_exposure(campaign: str, root=None) -> tuple[ExposureParity, pd.DataFrame, pd.DataFrame]:
    """(exposure parity of the BTS log, its examination curve, the BTS impressions) of one campaign."""
    curve = campaign_curve(campaign, root)
    bts, _ = impressions_and_extras("bts", items_table(root, campaign), root, campaign)
    result = exposure_parity(bts["position"], bts["click"], bts["group_id"].to_numpy(dtype=object), curve,
                             clusters={"item_id": bts["item_id"], "request_id": bts["request_id"]})
    return result, curve, bts


def _ci(value, low, high) -> str:
    return "not estimable" if pd.isna(value) else f"{value:.2f} [{low:.2f}, {high:.2f}]"


def exposure_table(campaigns=CAMPAIGNS, root=None) -> pd.DataFrame:
    """One row per campaign x group: impressions, clicks, items, exposure / merit with its CI, the ratio to the
    campaign's reference group with its CI, verdict; and the campaign's examination weights w2, w3 with CIs."""
    rows = []
    for campaign in campaigns:
        result, curve, _ = campaign_exposure(campaign, root)
        pairs = result.pairs.set_index("group")
        weights = "; ".join(f"w{int(r.position)} {_ci(r.weight, r.ci_low, r.ci_high)}" for r in curve.itertuples()
                            if r.position > 1)
        for g in result.per_group.itertuples():
            pair = pairs.loc[g.group] if g.group in pairs.index else None
            rows.append({
                "campaign": campaign, "group": g.group, "impressions": g.n, "clicks": g.clicks, "items": g.n_clusters,
                "exposure / merit [95% CI]": _ci(g.exposure_over_merit, g.ci_low, g.ci_high),
                "ratio to reference [95% CI]": "reference" if pair is None else _ci(pair.ratio, pair.ci_low,
                                                                                     pair.ci_high),
                "verdict": "reference" if pair is None else pair.verdict,
                "examination (random log)": weights})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    table = exposure_table(tuple(args) or CAMPAIGNS)
    print(table.to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
