"""Reproduce figure 2 of Nandy et al. (section 4.1) and print the README tables (Markdown).

    python benchmarks/penalized_reproduction.py [--out DIR]

Adult: lambda paths with the penalty on the probability and on the logit, audited on the held-out
US rows of adult.test; COMPAS: the vanilla Black vs White comparison and a short path.
SVG figures go to DIR (default $FAIR_PIPELINE_HOME/reports/penalized).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from threadpoolctl import threadpool_limits

from fair_pipeline.audit import holm
from fair_pipeline.platform import settings
from fair_pipeline.training import lambda_path
from fair_pipeline.training.figures import plot_group_comparison, plot_partial_auc_path
from fair_pipeline.training.penalized.gaps import audit_path
from fair_pipeline.training.reference.data import adult_split, compas_split

FIT = {"l2": 1e-4, "tol": 1e-5}
ADULT_GRID = [0.0, 0.3, 1.0, 3.0, 10.0, 30.0]
COMPAS_GRID = [0.0, 1.0, 3.0, 10.0]


def _ci(row, digits=3):
    return f"{row['gap']:+.{digits}f} [{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]"


def adult_tables(out: Path):
    split = adult_split()
    print(f"\n### Adult (train {len(split.y_train)} rows x {split.X_train.shape[1]} features; held-out {len(split.y_test)})\n")
    print("| penalty on | lambda | train Î | held-out AUC (SE) | F-M gap @0.1 [95% CI] | p | F-M gap @1 [95% CI] | p |")
    print("|---|---|---|---|---|---|---|---|")
    for score in ("probability", "logit"):
        path = lambda_path(split.X_train, split.y_train, split.groups_train, ADULT_GRID, penalty_score=score, **FIT)
        per_group, gaps, overall = audit_path(path, split.X_test, split.y_test, split.groups_test, "Female", "Male")
        for point in overall.itertuples():
            g = gaps[gaps["lam"] == point.lam].set_index("cutoff")
            print(
                f"| {score} | {point.lam:g} | {point.mi_proxy_train:.5f} | {point.auc:.4f} ({point.auc_se:.4f}) | "
                f"{_ci(g.loc[0.1])} | {g.loc[0.1, 'p_value']:.2g} | {_ci(g.loc[1.0])} | {g.loc[1.0, 'p_value']:.2g} |"
            )
        svg = plot_partial_auc_path(per_group, title=f"Adult: partial AUC by sex vs lambda (penalty on the {score})")
        (out / f"adult_path_{score}.svg").write_bytes(svg)


def compas_tables(out: Path):
    split = compas_split()
    path = lambda_path(split.X_train, split.y_train, split.groups_train, COMPAS_GRID, **FIT)
    per_group, gaps, overall = audit_path(path, split.X_test, split.y_test, split.groups_test, "African-American", "Caucasian")
    vanilla = per_group[per_group["lam"] == 0.0]
    vgaps = gaps[gaps["lam"] == 0.0].reset_index(drop=True)
    vgaps["p_holm"] = holm(vgaps["p_value"].to_numpy())
    print(f"\n### COMPAS, vanilla logistic regression (held-out {len(split.y_test)} rows)\n")
    print("| cutoff | Black pAUC [95% CI] (n) | White pAUC [95% CI] (n) | Black - White [95% CI] | p | Holm p |")
    print("|---|---|---|---|---|---|")
    for row in vgaps.itertuples():
        cells = []
        for group in ("African-American", "Caucasian"):
            r = vanilla[(vanilla["group"] == group) & (vanilla["cutoff"] == row.cutoff)].iloc[0]
            cells.append(f"{r['pauc']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] ({r['n_pos']}+/{r['n_neg']}-)")
        print(f"| {row.cutoff:g} | {cells[0]} | {cells[1]} | {_ci(row._asdict())} | {row.p_value:.2g} | {row.p_holm:.2g} |")
    print("\n| lambda | train Î | held-out AUC (SE) | B-W gap @1 [95% CI] | p |")
    print("|---|---|---|---|---|")
    for point in overall.itertuples():
        g = gaps[(gaps["lam"] == point.lam) & (gaps["cutoff"] == 1.0)].iloc[0]
        print(f"| {point.lam:g} | {point.mi_proxy_train:.5f} | {point.auc:.4f} ({point.auc_se:.4f}) | {_ci(g)} | {g['p_value']:.2g} |")
    (out / "compas_groups.svg").write_bytes(plot_group_comparison(vanilla, "COMPAS: vanilla model, Black vs White"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or settings.reports_dir() / "penalized"
    out.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(1):
        adult_tables(out)
        compas_tables(out)
    print(f"\nfigures written to {out}")


if __name__ == "__main__":
    main()
