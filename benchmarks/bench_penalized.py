"""Cost of the MI penalty on Adult, measured side by side in one run.

    python benchmarks/bench_penalized.py [--repeats 7] [--lam 10]

Prints, on the Adult training split (29,170 x 64), single-threaded BLAS:
  1. one objective-and-gradient evaluation, penalized / unpenalized (same code, same data); target <= 1.5
  2. whole fit, penalized / unpenalized, for L-BFGS and Adagrad, at each lambda; target <= 3. The
     penalized fit includes its unpenalized warm start (the proxy is undefined at theta = 0). Also
     the warm-started sweep over 0 and those lambdas / one unpenalized fit, and for every fit how
     converged it is (objective above a tight reference, gradient sup-norm).
  3. a lambda sweep warm-started along the path / the same grid fitted cold point by point.
  4. Fairlearn ExponentiatedGradient (EqualizedOdds, LogisticRegression) on the same split, if installed:
     time, held-out AUC and the Female - Male partial-AUC gap (cutoffs 0.1 and 1) with p-values.
Times are CPU seconds of this process (one BLAS thread), so other jobs on a shared machine inflate them less
than wall-clock time; ratios are medians of per-round ratios over interleaved rounds.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from fair_pipeline.audit import compare_groups
from fair_pipeline.training import MIPenalizedLogisticRegression, lambda_path
from fair_pipeline.training.penalized.gaps import gap_table
from fair_pipeline.training.penalized.mi_proxy import cells_of, encode_groups
from fair_pipeline.training.penalized.objective import PenalizedProblem, objective
from fair_pipeline.training.reference.data import adult_split

FIT = {"l2": 1e-4, "tol": 1e-5}
ADAGRAD = {"solver": "adagrad", "l2": 1e-4, "batch_size": 1024, "learning_rate": 0.1, "max_iter": 300, "random_state": 0}


def timed(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def interleaved_times(candidates: dict, repeats: int) -> dict:
    """Seconds per candidate per round; every round runs each candidate once, back to back."""
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            samples[name].append(timed(fn)[0])
    return {name: np.array(v) for name, v in samples.items()}


def paired_ratio(samples: dict, name, baseline) -> tuple[float, float, float]:
    """Median and quartiles of the per-round ratio: pairing neighbours in time cancels load drift."""
    ratios = samples[name] / samples[baseline]
    return tuple(np.percentile(ratios, [50, 25, 75]))


def bench_objective(split, lam, repeats):
    problem = _problem(split)
    theta = np.append(MIPenalizedLogisticRegression(lam=0.0, **FIT).fit(split.X_train, split.y_train).coef_[0], 0.0)
    inner = 3

    def evals(lam_, score):
        return lambda: [objective(theta, problem, lam_, score, FIT["l2"]) for _ in range(inner)]

    candidates = {"unpenalized": evals(0.0, "probability"), "probability": evals(lam, "probability"), "logit": evals(lam, "logit")}
    rounds = 20 * repeats
    t = interleaved_times(candidates, rounds)
    print("\n1. one objective + gradient evaluation (Adult train, n=%d, d=%d), %d interleaved rounds" % (*split.X_train.shape, rounds))
    print(f"   unpenalized median {1e3 * np.median(t['unpenalized']) / inner:.2f} ms")
    for score in ("probability", "logit"):
        ratio, q1, q3 = paired_ratio(t, score, "unpenalized")
        print(
            f"   penalized ({score:11s}) median {1e3 * np.median(t[score]) / inner:.2f} ms   "
            f"paired ratio {ratio:.2f} (IQR {q1:.2f}-{q3:.2f})   target <= 1.5: {'PASS' if ratio <= 1.5 else 'FAIL'}"
        )


def bench_fits(split, lams, repeats):
    """Whole fits and the warm-started sweep, each as a ratio to the unpenalized fit of the same solver."""
    X, y, g = split.X_train, split.y_train, split.groups_train
    problem = _problem(split)
    grid = [0.0, *lams]
    print("\n2. whole fit (penalty on the probability) / unpenalized fit, same solver, same data")
    print("   total = unpenalized warm start + penalized solve (what fit() does); sweep = lambda_path over", grid)
    print("   f - f_ref: objective above a tight reference fit (L-BFGS, tol 1e-10); |grad|: sup-norm at the solution")
    for solver, params in (("lbfgs", FIT), ("adagrad", ADAGRAD)):
        def fit(lam, params=params):
            return MIPenalizedLogisticRegression(lam=lam, **params).fit(X, y, sensitive_features=g)

        candidates = {"unpenalized": lambda: fit(0.0)}
        candidates.update({lam: (lambda lam=lam: fit(lam)) for lam in lams})
        candidates["sweep"] = lambda params=params: lambda_path(X, y, g, grid, **params)
        samples = interleaved_times(candidates, repeats)
        unpen = fit(0.0)
        print(f"   {solver}: unpenalized {np.median(samples['unpenalized']):.3f} s, {unpen.n_iter_} "
              f"{'iterations' if solver == 'lbfgs' else 'epochs'}, {_convergence(unpen, problem, 0.0)}")
        for lam in lams:
            ratio, q1, q3 = paired_ratio(samples, lam, "unpenalized")
            model = fit(lam)
            print(
                f"     lam={lam:<4g} total {np.median(samples[lam]):.3f} s   ratio {ratio:.2f} (IQR {q1:.2f}-{q3:.2f})   "
                f"target <= 3: {'PASS' if ratio <= 3 else 'FAIL'}   penalized stage {model.n_iter_} its, "
                f"{_convergence(model, problem, lam)}"
            )
        ratio, q1, q3 = paired_ratio(samples, "sweep", "unpenalized")
        print(f"     sweep ({len(grid)} points, warm-started) {np.median(samples['sweep']):.3f} s   "
              f"ratio to one unpenalized fit {ratio:.2f} (IQR {q1:.2f}-{q3:.2f})")


def _problem(split):
    codes, labels = encode_groups(split.groups_train)
    return PenalizedProblem(
        split.X_train, split.y_train.astype(float), np.ones(len(split.y_train)),
        cells_of(codes, split.y_train), 2 * labels.size, labels, True,
    )


_REFERENCE = {}


def _convergence(model, problem, lam) -> str:
    """How converged a fit is: objective gap to a tight L-BFGS reference and the gradient sup-norm."""
    if lam not in _REFERENCE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # tol 1e-10 can hit float resolution first
            ref = MIPenalizedLogisticRegression(lam=lam, **{**FIT, "tol": 1e-10}).fit(
                problem.X, problem.y, sensitive_features=problem.group_labels[problem.cells // 2]
            )
        _REFERENCE[lam] = objective(_theta(ref), problem, lam, "probability", FIT["l2"])[0]
    f, grad, _ = objective(_theta(model), problem, lam, "probability", FIT["l2"])
    return f"f - f_ref {f - _REFERENCE[lam]:.1e}, |grad| {np.max(np.abs(grad)):.1e}"


def _theta(model):
    return np.append(model.coef_[0], model.intercept_[0])


def bench_path(split, repeats):
    X, y, g = split.X_train, split.y_train, split.groups_train
    grid = [0.0, 1.0, 3.0, 10.0]

    def cold():
        return [MIPenalizedLogisticRegression(lam=lam, **FIT).fit(X, y, sensitive_features=g) for lam in grid]

    samples = interleaved_times({"warm path": lambda: lambda_path(X, y, g, grid, **FIT), "cold grid": cold}, repeats)
    print(f"\n3. lambda sweep {grid} (L-BFGS): warm path {np.median(samples['warm path']):.2f} s, "
          f"cold grid {np.median(samples['cold grid']):.2f} s, paired ratio {paired_ratio(samples, 'warm path', 'cold grid')[0]:.2f}")


def _audit_row(name, seconds, scores, split):
    comparison = compare_groups(scores, split.y_test, split.groups_test, (0.1, 1.0))
    gaps = gap_table(comparison, "Female", "Male").set_index("cutoff")
    auc = comparison.overall.set_index("cutoff").loc[1.0]
    print(
        f"   {name:34s} {seconds:7.2f} s   AUC {auc['auc']:.4f} ({auc['se']:.4f})   "
        f"gap@0.1 {gaps.loc[0.1, 'gap']:+.4f} (p={gaps.loc[0.1, 'p_value']:.3g})   "
        f"gap@1 {gaps.loc[1.0, 'gap']:+.4f} (p={gaps.loc[1.0, 'p_value']:.3g})"
    )


def bench_fairlearn(split, lam):
    print("\n4. held-out comparison (n_test = %d)" % len(split.y_test))
    X, y, g = split.X_train, split.y_train, split.groups_train
    runs = (
        ("logistic regression (lam=0)", {"lam": 0.0, **FIT}),
        (f"MI-penalized L-BFGS, lam={lam:g}", {"lam": lam, **FIT}),
        (f"MI-penalized Adagrad, lam={lam:g}", {"lam": lam, **ADAGRAD}),
    )
    for name, params in runs:
        seconds, model = timed(lambda: MIPenalizedLogisticRegression(**params).fit(X, y, sensitive_features=g))
        _audit_row(name, seconds, model.decision_function(split.X_test), split)
    try:
        from fairlearn.reductions import EqualizedOdds, ExponentiatedGradient
    except ImportError:
        print("   fairlearn not installed: skipped (pip install fairlearn)")
        return
    from sklearn.linear_model import LogisticRegression

    reduction = ExponentiatedGradient(LogisticRegression(C=1 / (FIT["l2"] * len(y)), max_iter=1000), EqualizedOdds())
    seconds, _ = timed(lambda: reduction.fit(X, y, sensitive_features=g))
    # The reduction returns a randomized classifier; its P(y=1) is the score for ranking audits.
    _audit_row("fairlearn ExpGrad(EqualizedOdds)", seconds, reduction._pmf_predict(split.X_test)[:, 1], split)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lam", type=float, default=10.0, help="lambda of sections 1 and 4")
    parser.add_argument("--fit-lams", default="1,3,10", help="lambdas of section 2 (increasing; also the sweep's grid)")
    parser.add_argument("--parts", default="objective,fits,path,compare", help="comma-separated subset")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    split = adult_split()
    with threadpool_limits(1):
        if "objective" in parts:
            bench_objective(split, args.lam, args.repeats)
        if "fits" in parts:
            bench_fits(split, [float(v) for v in args.fit_lams.split(",")], args.repeats)
        if "path" in parts:
            bench_path(split, args.repeats)
        if "compare" in parts:
            bench_fairlearn(split, args.lam)


if __name__ == "__main__":
    main()
