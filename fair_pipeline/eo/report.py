"""Presenting fitted EO transforms and re-ranking evaluations: markdown tables, a plot of the per-group
maps, the simulator's ground truth for the evaluation (no estimator reads it)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from fair_pipeline.charts import Panel, render
from fair_pipeline.charts.colours import CYCLE
from fair_pipeline.charts.panel import STYLES
from fair_pipeline.eo.transform import WeightedCDFTransformer
from fair_pipeline.ingestion.landing import truth_dir
from fair_pipeline.ingestion.simulation_config import SimulationConfig


def knots_summary(transforms: dict[str, WeightedCDFTransformer], level: float = 0.95) -> pd.DataFrame:
    """Per variant x group: clicks, summed weight, Kish effective n, the DKW band half-width of F*_{c,1},
    the knots kept (ties collapsed) and the score range they span."""
    rows = []
    for variant, model in transforms.items():
        band = model.cdf_band(level)
        for group in model.groups_:
            x, _ = model.knots_[group]
            rows.append(
                {
                    "variant": variant,
                    "group": group,
                    "n_positives": model.n_positives_[group],
                    "positive_weight": model.positive_weight_[group],
                    "n_effective": model.n_effective_[group],
                    f"cdf_band_{level:.0%}": band[group],
                    "knots": len(x),
                    "score_min": float(x[0]),
                    "score_max": float(x[-1]),
                }
            )
    return pd.DataFrame(rows)


def transforms_figure(transforms: dict[str, WeightedCDFTransformer], title: str = "") -> bytes:
    """Left: each group's weighted CDF F*_{c,1} (solid: first variant, dashed/dotted: the others) with its DKW
    band; right: the fair-score map s -> F^{-1}(F*_{c,1}(s)) against the identity. A group keeps its colour."""
    cdfs = Panel("weighted CDFs (band: 95% DKW, effective n)", "score s", "F*_c,1(s)")
    maps = Panel("fair-score maps", "score s", "fair score F^-1(F*_c,1(s))")
    for v, (variant, model) in enumerate(transforms.items()):
        band = model.cdf_band()
        for i, group in enumerate(model.groups_):
            colour, style = CYCLE[i % len(CYCLE)], STYLES[v % len(STYLES)]
            q, p = model.group_quantiles_[group], model.probabilities_
            series = f"group {group}, {variant}"
            if v == 0:
                cdfs.band(q, np.clip(p - band[group], 0, 1), np.clip(p + band[group], 0, 1), colour=colour, opacity=0.15)
            cdfs.line(q, p, series=series, colour=colour, style=style, width=1.2)
            x, y = model.knots_[group]
            maps.line(x, y, series=series, colour=colour, style=style, width=1.2)
    lo = min(float(m.knots_[g][0][0]) for m in transforms.values() for g in m.groups_)
    hi = max(float(m.knots_[g][0][-1]) for m in transforms.values() for g in m.groups_)
    maps.line([lo, hi], [lo, hi], series="identity", colour="#808080", width=0.8)
    return render([cdfs, maps], 2, panel_size=(380.0, 260.0), title=title)


def cdf_table(model: WeightedCDFTransformer, level: float = 0.95) -> pd.DataFrame:
    """Long table group, score, cdf, cdf_ci_low, cdf_ci_high: each group's F*_{c,1} at its knots with the
    simultaneous DKW band (Kish effective n); the fairness report's `eo_transform_cdf` contract."""
    band = model.cdf_band(level)
    frames = [
        pd.DataFrame(
            {
                "group": group,
                "score": model.group_quantiles_[group],
                "cdf": model.probabilities_,
                "cdf_ci_low": np.clip(model.probabilities_ - band[group], 0.0, 1.0),
                "cdf_ci_high": np.clip(model.probabilities_ + band[group], 0.0, 1.0),
                "n_positives": model.n_positives_[group],
                "n_effective": model.n_effective_[group],
            }
        )
        for group in model.groups_
    ]
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- evaluation tables
def _pm(value: float, se: float, digits: int = 4) -> str:
    if not np.isfinite(value):
        return "not estimable"
    return f"{value:.{digits}f} ± {se:.{digits}f}"


def per_group_markdown(per_group: pd.DataFrame) -> str:
    """Exposure, merit and their ratio (Corollary 1) per method x group, each ± SE, with sample sizes."""
    view = pd.DataFrame(
        {
            "method": per_group["method"],
            "group": per_group["group"],
            "merit M_c": [_pm(v, s) for v, s in zip(per_group["merit"], per_group["merit_se"])],
            "exposure v_obs(c)": [_pm(v, s) for v, s in zip(per_group["exposure"], per_group["exposure_se"])],
            "exposure / merit": [
                _pm(v, s) for v, s in zip(per_group["exposure_over_merit"], per_group["exposure_over_merit_se"])
            ],
            "mean position of Y(1)=1": per_group["mean_position_relevant"].round(2),
            "impressions": per_group["n_impressions"],
            "relevant": per_group["n_relevant"],
            "clicks": per_group["n_clicks"],
        }
    )
    return view.to_markdown(index=False)


def summary_markdown(summary: pd.DataFrame) -> str:
    """Per method: group-vs-group exposure/merit ratio (± SE), KS distance (p), CTR (± SE), counts."""
    view = pd.DataFrame(
        {
            "method": summary["method"],
            "alpha": summary["alpha"],
            "groups": summary["groups"],
            "exposure/merit ratio": [
                _pm(v, s) for v, s in zip(summary["exposure_over_merit_ratio"], summary["exposure_over_merit_ratio_se"])
            ],
            "KS distance": summary["ks_distance"].round(4),
            "KS p-value": summary["ks_pvalue"].map(lambda p: f"{p:.2g}"),
            "CTR": [_pm(v, s) for v, s in zip(summary["ctr"], summary["ctr_se"])],
            "clicks (group / reference)": [f"{a} / {b}" for a, b in zip(summary["n_clicks_group0"], summary["n_clicks_group1"])],
            "requests": summary["n_requests"],
        }
    )
    return view.to_markdown(index=False)


def positions_markdown(positions: pd.DataFrame, methods: tuple[str, ...] = ("raw", "unweighted", "weighted"), top: int = 10) -> str:
    """Share of each group's Y(1)=1 items at positions 1..top (Theorem 1, part 1), per method and group."""
    part = positions[positions["method"].isin(methods) & (positions["position"] <= top)]
    wide = part.pivot_table(index=["method", "group"], columns="position", values="share").round(4)
    wide.columns = [f"p{c}" for c in wide.columns]
    order = {m: i for i, m in enumerate(methods)}
    wide = wide.reset_index().sort_values(["method", "group"], key=lambda s: s.map(order) if s.name == "method" else s)
    return wide.to_markdown(index=False)


def exposure_merit_table(per_group: pd.DataFrame, rankings: dict[str, str] | None = None, z: float = 1.959963984540054) -> pd.DataFrame:
    """The fairness report's `exposure_merit` contract from a SIMULATION evaluation: per ranking ("before" = raw
    scores, "after" = weighted transform, "unweighted") and group, observed exposure v_obs(c) and merit M_c with
    normal 95% CIs (request-clustered SEs) and the group's impressions n."""
    rankings = rankings or {"raw": "before", "weighted": "after", "unweighted": "unweighted"}
    part = per_group[per_group["method"].isin(list(rankings))]
    return pd.DataFrame(
        {
            "ranking": part["method"].map(rankings).to_numpy(),
            "group": part["group"].to_numpy(),
            "exposure": part["exposure"].to_numpy(),
            "exposure_ci_low": (part["exposure"] - z * part["exposure_se"]).to_numpy(),
            "exposure_ci_high": (part["exposure"] + z * part["exposure_se"]).to_numpy(),
            "merit": part["merit"].to_numpy(),
            "merit_ci_low": (part["merit"] - z * part["merit_se"]).to_numpy(),
            "merit_ci_high": (part["merit"] + z * part["merit_se"]).to_numpy(),
            "n": part["n_impressions"].to_numpy(),
            "exposure_over_merit": part["exposure_over_merit"].to_numpy(),
            "exposure_over_merit_se": part["exposure_over_merit_se"].to_numpy(),
            "simulation": True,
        }
    )


# ----------------------------------------------------------------------------- ground truth (evaluation only)
@dataclasses.dataclass(frozen=True)
class SimulationTruth:
    config: SimulationConfig
    items: pd.DataFrame  # item_id, group_id, relevance, merit_score, in the simulator's item order


def load_simulation_truth(landing: Path, day: dt.date | str | None = None) -> SimulationTruth | None:
    """The simulator's config and item truth of partition `day` (`ingestion.landing.truth_dir`), or None (not a
    simulation).

    For the EVALUATION only: the held-out requests are re-simulated from them; no estimator reads them."""
    truth = truth_dir(landing, day)
    config_path, items_path = truth / "config.json", truth / "items.parquet"
    if not (config_path.exists() and items_path.exists()):
        return None
    try:
        config = SimulationConfig(**json.loads(config_path.read_text()))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{config_path}: not a SimulationConfig ({error})") from error
    items = pd.read_parquet(items_path)
    missing = {"item_id", "group_id", "relevance", "merit_score"} - set(items.columns)
    if missing:
        raise ValueError(f"{items_path}: lacks columns {sorted(missing)}")
    if len(items) != config.n_items:
        raise ValueError(f"{items_path}: {len(items)} items but {config_path} says n_items={config.n_items}")
    return SimulationTruth(config, items)
