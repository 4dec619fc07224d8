"""Vanilla and MI-penalized fits on Adult and COMPAS, audited on the held-out split (what the
`benchmark_models` asset runs; no Dagster, no DuckDB here).

Per dataset: an unpenalized scikit-learn ``LogisticRegression(C=inf)`` (the vanilla model) and a
warm-started ``lambda_path`` of ``MIPenalizedLogisticRegression`` (L-BFGS) per penalty score; every
model audited with per-group partial AUCs at cutoffs 0.1, 0.2, 0.5, 1 and the group gap with its
p-value (``training.penalized.gaps.audit_path``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from fair_pipeline.training import PathPoint, lambda_path, mi_proxy
from fair_pipeline.training.reference.data import BenchmarkSplit, adult_split, compas_split
from fair_pipeline.training.click_training import audit_rows
from fair_pipeline.training.penalized.gaps import CUTOFFS, audit_path

DEFAULT_LAMBDAS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


@dataclass(frozen=True)
class Benchmark:
    name: str
    load: Callable[[], BenchmarkSplit]
    group_a: str  # gaps are group_a minus group_b
    group_b: str


BENCHMARKS = {
    "adult": Benchmark("adult", adult_split, "Female", "Male"),
    "compas": Benchmark("compas", compas_split, "African-American", "Caucasian"),
}


@dataclass
class BenchmarkFit:
    """One fitted model with its held-out audit (long rows: ``training.click_training.audit_rows``)."""

    dataset: str
    model_kind: str  # "vanilla" | "penalized"
    penalty_score: str  # "none" for the vanilla model
    point: PathPoint
    audit: pd.DataFrame
    summary: dict  # held-out AUC (SE), counts, training Î, solver figures
    feature_names: list[str]

    @property
    def lam(self) -> float:
        return self.point.lam

    @property
    def model(self):
        return self.point.model


def _vanilla_point(split: BenchmarkSplit) -> PathPoint:
    started = time.perf_counter()
    model = LogisticRegression(C=np.inf, max_iter=2000).fit(split.X_train, split.y_train)  # no penalty
    seconds = time.perf_counter() - started
    # Î on the predicted probability, the default penalty score, so the vanilla row compares with the path.
    proxy = mi_proxy(model.predict_proba(split.X_train)[:, 1], split.y_train, split.groups_train)
    return PathPoint(0.0, model, float(proxy), int(model.n_iter_[0]), bool(model.n_iter_[0] < 2000), seconds)


def _fits(benchmark, split, points, model_kind, penalty_score) -> list[BenchmarkFit]:
    per_group, gaps, overall = audit_path(
        points, split.X_test, split.y_test, split.groups_test, benchmark.group_a, benchmark.group_b, CUTOFFS
    )
    rows = audit_rows(per_group, gaps)
    fits = []
    for point, summary in zip(points, overall.to_dict("records")):
        audit = rows[rows["lam"] == point.lam].drop(columns="lam").reset_index(drop=True)
        summary.update(n_train=int(split.y_train.size), n_pos_test=int(split.y_test.sum()),
                       n_neg_test=int(split.y_test.size - split.y_test.sum()))
        fits.append(BenchmarkFit(benchmark.name, model_kind, penalty_score, point, audit, summary, split.feature_names))
    return fits


def fit_benchmark(name: str, lambdas: Sequence[float] = DEFAULT_LAMBDAS,
                  penalty_scores: Sequence[str] = ("probability",), split: BenchmarkSplit | None = None) -> list[BenchmarkFit]:
    """The vanilla fit and one lambda path per penalty score on one benchmark dataset."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {list(BENCHMARKS)}")
    benchmark = BENCHMARKS[name]
    split = split or benchmark.load()
    # Single-threaded BLAS: on these matrix sizes threads only add contention (10x slower on a busy 2-core box).
    with threadpool_limits(limits=1, user_api="blas"):
        fits = _fits(benchmark, split, [_vanilla_point(split)], "vanilla", "none")
        for score in penalty_scores:
            points = lambda_path(split.X_train, split.y_train, split.groups_train, sorted(lambdas), penalty_score=score)
            fits.extend(_fits(benchmark, split, points, "penalized", score))
    return fits


def models_frame(fits: list[BenchmarkFit]) -> pd.DataFrame:
    """One row per fit: what `marts.benchmark_models` stores (coefficients as JSON)."""
    rows = []
    for fit in fits:
        coef = np.ravel(fit.model.coef_)
        rows.append({
            "dataset": fit.dataset, "model": fit.model_kind, "penalty_score": fit.penalty_score, "lam": fit.lam,
            "auc": fit.summary["auc"], "auc_se": fit.summary["auc_se"], "auc_drop": fit.summary["auc_drop"],
            "n_test": fit.summary["n_test"], "n_pos_test": fit.summary["n_pos_test"],
            "n_neg_test": fit.summary["n_neg_test"], "n_train": fit.summary["n_train"],
            "mi_proxy_train": fit.point.mi_proxy, "n_iter": fit.point.n_iter, "converged": fit.point.converged,
            "fit_seconds": fit.point.fit_seconds,
            "coefficients": pd.Series(coef, index=fit.feature_names).to_json(),
            "intercept": float(np.ravel(fit.model.intercept_)[0]),
        })
    return pd.DataFrame(rows)


def audits_frame(fits: list[BenchmarkFit]) -> pd.DataFrame:
    """Long audit rows of every fit (`marts.benchmark_model_audits`)."""
    return pd.concat(
        [fit.audit.assign(dataset=fit.dataset, model=fit.model_kind, penalty_score=fit.penalty_score, lam=fit.lam)
         for fit in fits],
        ignore_index=True,
    )[["dataset", "model", "penalty_score", "lam", *fits[0].audit.columns]]


__all__ = ["BENCHMARKS", "DEFAULT_LAMBDAS", "Benchmark", "BenchmarkFit", "audits_frame", "fit_benchmark", "models_frame"]
