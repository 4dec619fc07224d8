"""Logistic regression penalized by the Gaussian conditional-mutual-information proxy (Nandy et al. sec. 4).

Minimizes  (1/W) sum_i w_i logloss_i + 2 lam Î(s(X; theta); C | Y) + (l2/2)||beta||^2.
The group C is used only at fit time; prediction needs X alone.
"""
from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from fair_pipeline.training.penalized.adagrad import adagrad, measure_moments
from fair_pipeline.training.penalized.mi_proxy import (
    N_LABELS,
    CellMoments,
    GroupCoder,
    MIPenaltyError,
    cells_of,
    encode_groups,
    proxy_stats,
)
from fair_pipeline.training.penalized.objective import (
    SCORES,
    PenalizedProblem,
    mi_proxy_at,
    objective,
    scores_and_slope,
)
from fair_pipeline.training.penalized.precondition import loss_preconditioner

# L-BFGS history length: with the preconditioner, Adult at lam = 10 takes 38 iterations with 30 pairs,
# 51 with 10 (unpenalized: 17 either way), at O(30 d) memory.
LBFGS_MEMORY = 30


class MIPenalizedLogisticRegression(ClassifierMixin, BaseEstimator):
    """Binary logistic regression with a conditional-mutual-information fairness penalty.

    Parameters
    ----------
    lam : float >= 0
        Penalty weight lambda; the objective adds ``2 * lam * Î``. ``lam=0`` is plain logistic
        regression.
    penalty_score : {"probability", "logit"}
        Score whose per-(group, label) variances enter Î (not named ``score``: that is the
        scikit-learn accuracy method). "probability" (sigmoid of the logit, the default) closes
        the Adult partial-AUC gap as in the paper; with "logit" Î falls just as much (it only
        matches two moments of the per-group logit distributions) while the gap barely moves.
    solver : {"lbfgs", "adagrad"}
        Full-batch L-BFGS (scipy) or mini-batch Adagrad (also used by ``fit_stream``).
    l2 : float >= 0
        L2 weight on the coefficients (not the intercept) of the weight-normalized loss;
        ``l2 = 1 / (C * sum(sample_weight))`` matches ``sklearn LogisticRegression(C=C)``.
    max_iter : int
        L-BFGS iterations, or Adagrad epochs, per stage (unpenalized warm start, penalized fit).
    tol : float or None
        L-BFGS stops when the gradient's sup-norm is <= tol (None: 1e-6). Adagrad stops after 5 epochs whose
        epoch objective improves by less than ``tol`` relative (None: 1e-4).
    batch_size, learning_rate : Adagrad mini-batch size and base step. In-memory Adagrad and
        ``fit_stream`` keep running per-cell sums of the scores (see ``training.penalized.adagrad``).
    random_state : shuffling of in-memory Adagrad batches.
    warm_start : bool
        Start from the previous fit's coefficients (used by ``lambda_path``). Otherwise a penalized
        fit first fits the unpenalized model and starts from it: Î is undefined at theta = 0
        (constant scores).

    Attributes
    ----------
    coef_ (1, n_features), intercept_ (1,), classes_, n_features_in_, groups_ (group labels seen at
    fit, or None), mi_proxy_ (Î on the training data at the solution; NaN without groups, or when
    lam = 0 and some (group, label) cell leaves Î undefined), n_iter_ (iterations / epochs of the
    last stage), converged_.

    Without ``sensitive_features`` (as in scikit-learn's estimator checks) there is one group and
    Î is identically 0: the estimator is then plain logistic regression and warns when lam > 0.
    """

    _parameter_constraints = {
        "lam": [Interval(Real, 0, None, closed="left")],
        "penalty_score": [StrOptions(set(SCORES))],
        "solver": [StrOptions({"lbfgs", "adagrad"})],
        "l2": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
    }

    def __init__(
        self,
        lam=1.0,
        *,
        penalty_score="probability",
        solver="lbfgs",
        l2=0.0,
        fit_intercept=True,
        max_iter=1000,
        tol=None,
        batch_size=1024,
        learning_rate=0.1,
        random_state=None,
        warm_start=False,
    ):
        self.lam = lam
        self.penalty_score = penalty_score
        self.solver = solver
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.warm_start = warm_start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ fitting in memory
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sensitive_features=None, sample_weight=None):
        """Fit on in-memory data. ``sensitive_features`` (one column) is needed for the penalty only.

        Without ``sensitive_features`` there is one group, Î is identically 0 and this is plain
        logistic regression (a warning says so when lam > 0).
        """
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        y01 = self._encode_labels(y)
        w = _check_sample_weight(sample_weight, X, dtype=np.float64)
        penalized = self.lam > 0 and sensitive_features is not None
        cells, n_cells, labels = None, 0, None
        if sensitive_features is not None:
            groups = _column(sensitive_features, X.shape[0])
            codes, labels = encode_groups(groups)
            cells, n_cells = cells_of(codes, y01), N_LABELS * labels.size
        elif self.lam > 0:
            warnings.warn(
                "fit() got no sensitive_features: the mutual-information penalty is 0 and this "
                "is an unpenalized logistic regression",
                UserWarning,
                stacklevel=2,
            )
        problem = PenalizedProblem(X, y01.astype(float), w, cells, n_cells, labels, self.fit_intercept)
        if penalized:
            _check_cell_counts(problem)
        theta = self._initial_theta(problem.n_features)
        if penalized and theta is None:
            theta = self._solve(problem, self._zeros(problem.n_features), lam=0.0)
        elif theta is None:
            theta = self._zeros(problem.n_features)
        if penalized:
            problem.proxy_stats(scores_and_slope(problem.linear(theta), self.penalty_score)[0])
        theta = self._solve(problem, theta, lam=self.lam if penalized else 0.0)
        self._store(theta, problem.n_features)
        self.groups_ = labels
        self.mi_proxy_ = _defined_or_nan(lambda: mi_proxy_at(theta, problem, self.penalty_score)) if cells is not None else np.nan
        return self

    def _solve(self, problem, theta0, *, lam):
        if self.solver == "lbfgs":
            return self._lbfgs(problem, theta0, lam)
        rng = check_random_state(self.random_state)
        n = problem.X.shape[0]

        def epoch():
            order = rng.permutation(n)
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                cells = None if problem.cells is None else problem.cells[idx]
                yield problem.X[idx], problem.y[idx], cells, problem.w[idx]

        moments = None
        if lam > 0:
            s, _ = scores_and_slope(problem.linear(theta0), self.penalty_score)
            moments = CellMoments.from_scores(s, problem.cells, problem.w, problem.n_cells)
            proxy_stats(moments, problem.group_labels)  # names a constant-score cell before any step
        return self._adagrad(epoch, theta0, lam, moments)

    def _lbfgs(self, problem, theta0, lam):
        """L-BFGS on preconditioned coordinates u (``training.penalized.precondition``).

        Stops when the gradient in theta (not u) has sup-norm <= tol: the criterion does not
        depend on the preconditioner and is the same for penalized and unpenalized fits.
        """
        tol = 1e-6 if self.tol is None else self.tol
        pre = loss_preconditioner(problem, theta0, self.l2)
        last = {}

        def fun(u):
            f, g, _ = objective(pre.to_theta(u), problem, lam, self.penalty_score, self.l2)
            last["u"], last["g"] = u.copy(), g
            return f, pre.gradient_in_u(g)

        def stop_when_converged(intermediate_result):
            # L-BFGS-B reports each new iterate right after evaluating it: the cached gradient is its own.
            if np.array_equal(intermediate_result.x, last["u"]) and np.max(np.abs(last["g"])) <= tol:
                raise StopIteration

        res = minimize(
            fun,
            pre.to_u(theta0),
            jac=True,
            method="L-BFGS-B",
            callback=stop_when_converged,
            options={
                "maxiter": self.max_iter,
                "maxfun": 2 * self.max_iter + 20,
                "gtol": 0.0,  # the theta-gradient test above decides
                "ftol": 64 * np.finfo(float).eps,
                "maxcor": LBFGS_MEMORY,
            },
        )
        theta = pre.to_theta(res.x)
        if not np.array_equal(res.x, last["u"]):
            last["g"] = objective(theta, problem, lam, self.penalty_score, self.l2)[1]
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(np.max(np.abs(last["g"])) <= tol)
        if not self.converged_:
            warnings.warn(
                f"L-BFGS did not converge (lam={lam}): {res.message}; gradient sup-norm "
                f"{np.max(np.abs(last['g'])):.3g} > tol {tol:g}",
                ConvergenceWarning,
                stacklevel=3,
            )
        return theta

    def _adagrad(self, epoch, theta0, lam, moments):
        result = adagrad(
            epoch,
            theta0,
            lam=lam,
            score=self.penalty_score,
            l2=self.l2,
            fit_intercept=self.fit_intercept,
            learning_rate=self.learning_rate,
            max_epochs=self.max_iter,
            tol=1e-4 if self.tol is None else self.tol,
            moments=moments,
        )
        self.n_iter_ = result.n_epochs
        self.converged_ = result.converged
        if not result.converged:
            warnings.warn(
                f"Adagrad did not converge in {self.max_iter} epochs (lam={lam})",
                ConvergenceWarning,
                stacklevel=3,
            )
        return result.theta

    # ------------------------------------------------------------------ streaming
    def fit_stream(self, batches, *, n_features=None, classes=(0, 1)):
        """Fit with Adagrad on a stream of ``(X, y, sensitive_features, sample_weight)`` chunks.

        ``batches`` is a callable returning a fresh iterable of chunks (one call per pass, e.g. a
        DuckDB query fetched in chunks) or a re-iterable such as a list; a one-shot generator is
        rejected because every epoch re-reads the data. ``sample_weight`` may be None.
        Passes: unpenalized epochs (unless warm-starting), then if lam > 0 one statistics pass
        (validates every (group, label) cell) and the penalized epochs, and one final pass for
        ``mi_proxy_`` when groups are given. ``classes`` maps labels: ``classes[1]`` is positive.
        """
        self._validate_params()
        epoch_source = _epoch_source(batches)
        self.classes_ = np.asarray(classes)
        if self.classes_.size != 2:
            raise ValueError(f"classes must hold the 2 labels of a binary problem, got {classes!r}")
        coder = GroupCoder()

        def epoch():
            for X, y, groups, w in epoch_source():
                X = np.asarray(X, dtype=np.float64) if not hasattr(X, "tocsr") else X.tocsr()
                y01 = self._encode_labels(np.asarray(y), fitted_classes=True)
                w = np.ones(X.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
                cells = None if groups is None else cells_of(coder.encode(_column(groups, X.shape[0])), y01)
                yield X, y01.astype(float), cells, w

        if n_features is None:
            n_features = np.shape(next(iter(epoch_source()))[0])[1]
        theta = self._initial_theta(n_features)
        if theta is None:  # unpenalized warm start
            theta = self._adagrad(epoch, self._zeros(n_features), 0.0, None)
        if self.lam > 0:
            moments = measure_moments(epoch, theta, score=self.penalty_score, fit_intercept=self.fit_intercept)
            proxy_stats(moments, coder.labels)  # validates counts and constant scores on the full data
            theta = self._adagrad(epoch, theta, self.lam, moments)
        self.mi_proxy_ = np.nan
        if coder.labels.size:  # groups were given: report Î at the solution (one more pass)
            self.mi_proxy_ = _defined_or_nan(
                lambda: proxy_stats(
                    measure_moments(epoch, theta, score=self.penalty_score, fit_intercept=self.fit_intercept),
                    coder.labels,
                ).value
            )
        self._store(theta, n_features)
        self.groups_ = coder.labels if coder.labels.size else None
        return self

    # ------------------------------------------------------------------ helpers
    def _encode_labels(self, y, fitted_classes=False):
        if not fitted_classes:
            check_classification_targets(y)
            self.classes_ = np.unique(y)
            k = self.classes_.size
            if k != 2:
                raise ValueError(
                    f"Only binary classification is supported. y has {k} class"
                    f"{'' if k == 1 else 'es'} ({self.classes_[:5].tolist()}); "
                    f"{type(self).__name__} needs exactly 2"
                )
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(f"labels {np.unique(y[unknown])[:5].tolist()} are not in classes {self.classes_.tolist()}")
        return (y == self.classes_[1]).astype(np.intp)

    def _zeros(self, n_features):
        return np.zeros(n_features + int(self.fit_intercept))

    def _initial_theta(self, n_features):
        if not (self.warm_start and hasattr(self, "coef_")):
            return None
        if self.coef_.shape[1] != n_features:
            raise ValueError(
                f"warm_start: previous fit had {self.coef_.shape[1]} features, this one {n_features}"
            )
        theta = self.coef_.ravel().copy()
        return np.append(theta, self.intercept_[0]) if self.fit_intercept else theta

    def _store(self, theta, n_features):
        beta = theta[:n_features]
        self.coef_ = beta.reshape(1, -1).copy()
        self.intercept_ = np.array([theta[-1] if self.fit_intercept else 0.0])
        self.n_features_in_ = n_features

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return np.asarray(X @ self.coef_[0]).ravel() + self.intercept_[0]

    def predict_proba(self, X):
        p = scores_and_slope(self.decision_function(X), "probability")[0]
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]


def _defined_or_nan(proxy) -> float:
    # An unpenalized fit may have a tiny or constant cell: Î is then undefined, reported as NaN.
    try:
        return proxy()
    except (MIPenaltyError, ValueError):
        return np.nan


def _column(values, n_rows: int) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.shape[0] != n_rows:
        raise ValueError(
            f"sensitive_features must be one column with one entry per row ({n_rows}), "
            f"got shape {values.shape}"
        )
    return values


def _check_cell_counts(problem: PenalizedProblem) -> None:
    """Fail fast, before any solver work, on a (group, label) cell with fewer than 2 members."""
    n = problem.n_cells
    counts_only = CellMoments(problem.cell_weight, np.zeros(n), problem.cell_weight.copy(), problem.cell_count)
    proxy_stats(counts_only, problem.group_labels)  # variances are 1 here: only counts are checked


def _epoch_source(batches):
    if callable(batches):
        return batches
    if iter(batches) is batches:
        raise TypeError(
            "fit_stream needs to read the batches once per epoch: pass a callable returning a "
            "fresh iterator (e.g. lambda: read_chunks(...)) or a list, not a one-shot generator"
        )
    return lambda: iter(batches)


__all__ = ["MIPenalizedLogisticRegression", "MIPenaltyError"]
