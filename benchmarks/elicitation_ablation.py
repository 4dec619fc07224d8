"""Ablation of the two places where the implementation departs from the paper's Algorithm 1,
measured side by side on the same 100 random metrics (k = 2, exact answers, tolerance 1e-2):

* anchor: "center" solves the slope equations at the small spheres' centres (the paper's
  first-order Taylor closed form, eq. 9); "boundary" at the boundary points LPME found, where the
  gradient is exactly parallel to the found direction.
* mirrored: "first" mirrors only z_1 (the paper's k + 2 spheres); "all" mirrors every z_j.

    python -m benchmarks.elicitation_ablation [--metrics 100] [--groups 2]
"""
from __future__ import annotations

import argparse

from fair_pipeline.selection.elicitation import evaluate_elicitation


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=100)
    parser.add_argument("--groups", type=int, default=2)
    args = parser.parse_args(argv)
    rows = {}
    print(f"{'anchor':>8} {'mirrored':>8} | {'agree':>7} {'min':>6} | {'med|a|':>7} {'med|B|':>7} {'med|lam|':>8} | {'queries':>7}")
    for anchor, mirrored in [("center", "first"), ("boundary", "first"), ("center", "all"), ("boundary", "all")]:
        row = evaluate_elicitation(args.metrics, args.groups, tolerance=1e-2, seed=0,
                                   anchor=anchor, mirrored=mirrored).row()
        rows[(anchor, mirrored)] = row
        print(f"{anchor:>8} {mirrored:>8} | {row['agreement_mean']:>7.4f} {row['agreement_min']:>6.3f} | "
              f"{row['median_err_a']:>7.4f} {row['median_err_B']:>7.4f} {row['median_err_lam']:>8.4f} | "
              f"{row['queries_mean']:>7.1f}", flush=True)
    paper, ours = rows[("center", "first")], rows[("boundary", "all")]
    print(f"median |B^ - B| ratio paper / ours: {paper['median_err_B'] / ours['median_err_B']:.1f}; "
          f"median |lam^ - lam| ratio: {paper['median_err_lam'] / ours['median_err_lam']:.1f}; "
          f"query ratio ours / paper: {ours['queries_mean'] / paper['queries_mean']:.2f}")


if __name__ == "__main__":
    main()
