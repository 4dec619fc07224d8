"""docs/selection.md's ranking table, printed from a finished run's `marts.model_ranking` (nothing recomputed).

Run it after `fair-pipeline run --start 2026-01-01 --days 7` on the same home: one markdown row per shown
candidate of partition 2026-01-07 (ranks 1-3, the registered champion, each other family's best, the unpenalized
ranker), with the cost's marginal 95% CI and the paired difference to the winner clustered by item (its 95% t
interval at `diff_df` degrees of freedom, as the report shows it), then the paired SE and df of the runner-up.

    FAIR_PIPELINE_HOME=DIR python benchmarks/selection_week_table.py
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import duckdb
import pandas as pd

from fair_pipeline.reporting.formatting import ci_text, p_phrase

HEADER = ("| rank | candidate | family | cost [95% CI] | Δ cost vs winner [95% CI, paired by item], p | error part | "
          "violation part | TPR g0 / g1 | TNR g0 / g1 |\n|---|---|---|---|---|---|---|---|---|")
UNPENALIZED = "lam=0/alpha=0"


def load_ranking(home: Path, partition: str) -> pd.DataFrame:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM marts.model_ranking WHERE partition_date = $day ORDER BY rank",
                           {"day": partition}).df()


def shown_rows(ranking: pd.DataFrame) -> pd.DataFrame:
    """Ranks 1-3, the champion, each other family's best and the unpenalized ranker, in rank order."""
    ranked = ranking[ranking["rank"].notna()]
    keep = set(ranked.index[:3])
    keep |= set(ranked.index[ranked["champion_version"].notna()])
    keep |= set(ranked.drop_duplicates("family").index)
    keep |= set(ranked.index[ranked["model"].str.endswith(UNPENALIZED) & (ranked["family"] == "mi_penalty")])
    return ranked.loc[sorted(keep, key=lambda i: ranked.at[i, "rank"])]


def markdown_row(row: pd.Series) -> str:
    rank = f"{int(row['rank'])}" + (" (`fair-ranker@champion`)" if pd.notna(row["champion_version"]) else "")
    if row["diff_vs_winner"] == 0 and pd.isna(row["diff_ci_low"]):
        paired = "winner (reference)"
    else:
        paired = (ci_text(row["diff_vs_winner"], row["diff_ci_low"], row["diff_ci_high"], digits=4, signed=True)
                  + f", {p_phrase(row['diff_p'])}")
    return (f"| {rank} | {row['model']} | {row['family']} | {ci_text(row['cost'], row['ci_low'], row['ci_high'], digits=4)} "
            f"| {paired} | {row['error_part']:.3f} | {row['violation_part']:.4f} | {row['tpr[0]']:.3f} / "
            f"{row['tpr[1]']:.3f} | {row['tnr[0]']:.3f} / {row['tnr[1]']:.3f} |")


def table(ranking: pd.DataFrame) -> str:
    return "\n".join([HEADER, *(markdown_row(r) for _, r in shown_rows(ranking).iterrows())])


def runner_up_line(ranking: pd.DataFrame) -> str:
    runner = ranking[ranking["rank"] == 2].iloc[0]
    return (f"runner-up − winner: SE {runner['diff_se']:.5f}, df {runner['diff_df']:.0f}, 95% CI "
            f"[{runner['diff_ci_low']:+.4f}, {runner['diff_ci_high']:+.4f}]; winner's own cost SE clustered by item "
            f"{ranking[ranking['rank'] == 1].iloc[0]['cost_se_clustered']:.5f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("FAIR_PIPELINE_HOME", "data")))
    ap.add_argument("--partition", default="2026-01-07")
    a = ap.parse_args(argv)
    ranking = load_ranking(a.home, a.partition)
    if ranking.empty:
        raise SystemExit(f"no marts.model_ranking rows of partition {a.partition} in {a.home / 'warehouse.duckdb'}")
    print(table(ranking))
    print()
    print(runner_up_line(ranking))


if __name__ == "__main__":
    main()
