"""Rankers trained under pairwise fairness constraints (Narasimhan et al. 2020), by the proxy-Lagrangian.

Pairs are formed inside a query between a label-1 (better) and a label-0 (worse) item. For groups,
A_{a>b} is the share of correctly ordered pairs whose better item is in group a and worse item in b
(eq. 1); the marginal A_{a>:} pools the worse group (eq. 2); for a continuous protected attribute z,
A_> (A_<) is the accuracy on pairs whose better item has the larger (smaller) z (eqs. 9-11). The
training problem (eq. 12) maximizes the overall pairwise accuracy (AUC) subject to

* ``cross_group_equal_opportunity``: A_{a>b} - A_{c>d} <= slack for all ordered off-diagonal cells;
* ``marginal_equal_opportunity``:     A_{a>:} - A_{b>:} <= slack for all groups a != b;
* ``continuous``:                     A_> - A_< <= slack and A_< - A_> <= slack;
* ``None``:                           no constraint (the unconstrained ranker, same optimizer).

Optimizer (appendix, Cotter et al. 2019a, Algorithm 2): the theta-player takes Adam steps on
L_theta = lambda_0 (-AUC~ + l2/2 |w|^2) + sum_j lambda_j (Delta~_j - slack), where every indicator is
replaced by a surrogate (``hinge``: lower bound min(1, d), upper bound max(0, 1 + d) of 1[d > 0], with
d = f(x_better) - f(x_worse); ``sigmoid``: sigma(d) for both); a constraint takes the upper bound of
the accuracies it adds and the lower bound of those it subtracts. The lambda-player sees the true
indicators: a column-stochastic (m+1) x (m+1) matrix M gets the multiplicative update
M_ij <- M_ij exp(eta_lambda g_i lambda_j) (g = (0, Delta_1 - slack, ...)), columns renormalized, and
lambda is M's stationary distribution (swap-regret). Snapshots of w are scored (indicator AUC and
constraint violations) on a fixed evaluation sample of pairs; `coef_` is the best feasible snapshot
(highest AUC among those with every violation <= 0, else the smallest worst violation: the "best
iterate" of Cotter et al. 2019b), and `mixture_` the shrinking LP's stochastic model on <= m + 1
snapshots (the paper's guarantee is for that stochastic model).

Pair budget: pairs are never enumerated. Each step draws ``pairs_per_step`` pairs per cell, uniformly
among the cell's pairs (query with probability P_qa N_qb / T_ab, then a uniform better item of group a
and worse item of group b inside it), so a step costs O(cells * pairs_per_step * (features + log Q))
whatever the query sizes; preprocessing is one O(n log n) sort. The evaluation sample has
``eval_pairs`` pairs per cell, drawn once; scoring the snapshots costs n_snapshots * cells * eval_pairs *
features in all. Neither depends on the number of pairs in the data.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from sklearn.base import BaseEstimator

CONSTRAINTS = ("cross_group_equal_opportunity", "marginal_equal_opportunity", "continuous", None)
SURROGATES = ("hinge", "sigmoid")


class PairwiseFairnessError(ValueError):
    """Bad input to PairwiseFairRanker (names what and where)."""


def _sigmoid(d):
    return 0.5 * (1.0 + np.tanh(0.5 * d))


class _CellSampler:
    """Draws of (better, worse) row pairs inside queries, from one cell of pairs.

    Without weights every pair of the cell is equally likely; with row weights w, pair (i, j) has
    probability proportional to w_i w_j (query q with probability W_q^better W_q^worse / sum, then each item
    in proportion to its weight inside q, by binary search on cumulative weights).
    """

    def __init__(self, qcode, better_rows, worse_rows, n_queries, weight=None):
        self.weighted = weight is not None
        self.better = self._by_query(qcode, better_rows, n_queries, weight)
        self.worse = self._by_query(qcode, worse_rows, n_queries, weight)
        w = self.better[1] * self.worse[1]
        self.n_pairs = float(w.sum())  # weighted pair count when weights are given
        self.cum = np.cumsum(w) / (self.n_pairs if self.n_pairs > 0 else 1.0)

    @staticmethod
    def _by_query(qcode, rows, n_queries, weight):
        rows = rows[np.argsort(qcode[rows], kind="stable")]
        w = np.ones(rows.size) if weight is None else weight[rows]
        totals = np.bincount(qcode[rows], weights=w, minlength=n_queries)
        cum = np.cumsum(w)
        start = np.r_[0.0, np.cumsum(totals)[:-1]]
        return rows, totals, start, cum

    def draw(self, rng, m):
        q = np.minimum(np.searchsorted(self.cum, rng.random(m), side="right"), self.cum.size - 1)
        out = []
        for rows, totals, start, cum in (self.better, self.worse):
            target = start[q] + rng.random(m) * totals[q]
            if self.weighted:
                k = np.searchsorted(cum, target, side="right")
            else:  # unit weights: the same index without the binary search
                k = target.astype(np.int64)
            out.append(rows[np.clip(k, 0, rows.size - 1)])
        return out[0], out[1]


class PairwiseFairRanker(BaseEstimator):
    """Linear ranker f(x) = x . coef_ trained on within-query pairs under a pairwise fairness constraint.

    Parameters
    ----------
    constraint : "cross_group_equal_opportunity" (default) | "marginal_equal_opportunity" | "continuous" | None
        (unconstrained; the groups then only stratify the pair draws).
    slack : float, default 0.02. Allowed difference epsilon of eq. (12).
    surrogate : "hinge" (default, as in the paper) | "sigmoid".
    n_iter : gradient steps (default 1000). learning_rate : Adam step of the theta-player (0.05).
    lambda_learning_rate : step of the lambda-player (default: learning_rate, as in the paper's tuning).
    pairs_per_step : pairs drawn per cell per step (1000). eval_pairs : pairs per cell of the snapshot sample (20000).
    n_snapshots : snapshots kept (100). l2 : ridge weight on coef_ (1e-3). random_state : seed.

    Fitted attributes
    -----------------
    coef_ (n_features,), n_features_in_, groups_ (group labels; None for "continuous"), cells_ (cell names),
    constraint_names_, history_ (DataFrame per snapshot: step, auc, violations, lambda_0),
    mixture_ (DataFrame snapshot, weight: the shrunk stochastic model), snapshot_coefs_ (n_snapshots, n_features),
    feasible_ (the chosen snapshot meets every constraint on the evaluation pairs), train_auc_, train_violation_.
    """

    def __init__(self, constraint="cross_group_equal_opportunity", slack: float = 0.02, *, surrogate: str = "hinge",
                 n_iter: int = 1000, learning_rate: float = 0.05, lambda_learning_rate=None,
                 pairs_per_step: int = 1000, eval_pairs: int = 20_000, n_snapshots: int = 100, l2: float = 1e-3,
                 random_state=None):
        self.constraint = constraint
        self.slack = slack
        self.surrogate = surrogate
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.lambda_learning_rate = lambda_learning_rate
        self.pairs_per_step = pairs_per_step
        self.eval_pairs = eval_pairs
        self.n_snapshots = n_snapshots
        self.l2 = l2
        self.random_state = random_state

    # ------------------------------------------------------------------ problem set-up
    def _check(self, X, y, sensitive_features, query_ids):
        if self.constraint not in CONSTRAINTS:
            raise PairwiseFairnessError(f"constraint must be one of {CONSTRAINTS}, got {self.constraint!r}")
        if self.surrogate not in SURROGATES:
            raise PairwiseFairnessError(f"surrogate must be one of {SURROGATES}, got {self.surrogate!r}")
        if not self.slack >= 0:
            raise PairwiseFairnessError(f"slack must be >= 0, got {self.slack}")
        for name in ("n_iter", "pairs_per_step", "eval_pairs", "n_snapshots"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise PairwiseFairnessError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("learning_rate", "l2"):
            if not getattr(self, name) >= 0:
                raise PairwiseFairnessError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise PairwiseFairnessError(f"X must be two-dimensional, got shape {X.shape}")
        if not np.isfinite(X).all():
            raise PairwiseFairnessError("X has non-finite values")
        n = X.shape[0]
        y = np.asarray(y).ravel()
        if y.size != n:
            raise PairwiseFairnessError(f"y has {y.size} entries, X has {n} rows")
        if not set(np.unique(y).tolist()) <= {0, 1, True, False}:
            raise PairwiseFairnessError("y must be 0/1 (1 = the better item of a pair)")
        if query_ids is None:
            raise PairwiseFairnessError("query_ids is required: pairs are formed inside queries")
        q = np.asarray(query_ids, dtype=object).ravel()
        if q.size != n:
            raise PairwiseFairnessError(f"query_ids has {q.size} entries, X has {n} rows")
        if sensitive_features is None:
            raise PairwiseFairnessError("sensitive_features is required (groups, or z for constraint='continuous')")
        z = np.asarray(sensitive_features, dtype=object if self.constraint != "continuous" else np.float64).ravel()
        if z.size != n:
            raise PairwiseFairnessError(f"sensitive_features has {z.size} entries, X has {n} rows")
        if self.constraint == "continuous" and not np.isfinite(z).all():
            raise PairwiseFairnessError("sensitive_features (continuous z) has non-finite values")
        return X, y.astype(bool), z, pd.factorize(q)[0]

    def _cells(self, y, z, qcode, Q, weight=None):
        """Samplers per cell, each cell's share of all pairs, and the constraint matrix over cells."""
        rows = np.arange(y.size)
        if self.constraint == "continuous":
            sampler = _CellSampler(qcode, rows[y], rows[~y], Q, weight)
            if sampler.n_pairs == 0:
                raise PairwiseFairnessError("no query has both a label-1 and a label-0 item: no pairs to train on")
            self.groups_ = None
            return [sampler], ["all"], np.array([1.0]), np.array([[1.0, -1.0], [-1.0, 1.0]]), ["A_> - A_<", "A_< - A_>"]
        levels = sorted(set(z.tolist()), key=str)
        self.groups_ = levels
        cells, names = [], []
        for a, b in itertools.product(levels, levels):
            cells.append(_CellSampler(qcode, rows[y & (z == a)], rows[~y & (z == b)], Q, weight))
            names.append(f"{a}>{b}")
        T = np.array([c.n_pairs for c in cells])
        if T.sum() == 0:
            raise PairwiseFairnessError("no query has both a label-1 and a label-0 item: no pairs to train on")
        G = len(levels)
        rows_c, cnames = [], []
        if self.constraint == "cross_group_equal_opportunity":
            off = [i * G + j for i in range(G) for j in range(G) if i != j]
            for u, v in itertools.permutations(off, 2):
                r = np.zeros(G * G)
                r[u], r[v] = 1.0, -1.0
                rows_c.append(r)
                cnames.append(f"A_{{{names[u]}}} - A_{{{names[v]}}}")
        elif self.constraint == "marginal_equal_opportunity":
            for a, b in itertools.permutations(range(G), 2):
                r = np.zeros(G * G)
                for k, sign in ((a, 1.0), (b, -1.0)):
                    tot = T[k * G:(k + 1) * G].sum()
                    if tot == 0:
                        raise PairwiseFairnessError(f"group {levels[k]!r} is never the better item of a pair")
                    r[k * G:(k + 1) * G] += sign * T[k * G:(k + 1) * G] / tot
                rows_c.append(r)
                cnames.append(f"A_{{{levels[a]}>:}} - A_{{{levels[b]}>:}}")
        if self.constraint is not None:
            used = np.flatnonzero(np.abs(np.array(rows_c)).sum(0) > 0)
            empty = [names[c] for c in used if T[c] == 0]
            if empty:
                raise PairwiseFairnessError(f"constrained cells have no pairs inside any query: {empty}")
        C = np.array(rows_c).reshape(len(rows_c), G * G)
        return cells, names, T / T.sum(), C, cnames

    def _draw(self, rng, X, z, m):
        """Per cell: pair differences X_better - X_worse (continuous: split by the sign of z_b - z_w)."""
        if self.constraint == "continuous":
            b, w = self.samplers_[0].draw(rng, 2 * m)
            D = X[b] - X[w]
            dz = z[b] - z[w]
            return [D, D[dz > 0], D[dz < 0]]
        out = []
        for s in self.samplers_:
            if s.n_pairs == 0:
                out.append(np.zeros((0, X.shape[1])))
            else:
                b, w = s.draw(rng, m)
                out.append(X[b] - X[w])
        return out

    def _bounds(self, d):
        if self.surrogate == "sigmoid":
            v = _sigmoid(d)
            g = v * (1 - v)
            return v, g, v, g
        return np.minimum(d, 1.0), (d < 1.0).astype(float), np.maximum(0.0, 1.0 + d), (d > -1.0).astype(float)

    def _stats(self, Ds, w, surrogate: bool):
        """Objective AUC and constraint values (indicators), and their surrogate gradients if asked."""
        ind, lo, glo, up, gup = [], [], [], [], []
        for D in Ds:
            if D.shape[0] == 0:
                ind.append(0.0)
                lo.append(0.0), up.append(0.0), glo.append(np.zeros(w.size)), gup.append(np.zeros(w.size))
                continue
            d = D @ w
            ind.append(float(np.mean((d > 0) + 0.5 * (d == 0))))
            if surrogate:
                l, gl, u, gu = self._bounds(d)
                lo.append(l.mean()), up.append(u.mean())
                glo.append(gl @ D / d.size), gup.append(gu @ D / d.size)
        ind = np.array(ind)
        if self.constraint == "continuous":
            auc, cell_ind = ind[0], ind[1:]
        else:
            auc, cell_ind = float(self.cell_shares_ @ ind), ind
        viol = self.constraint_matrix_ @ cell_ind - self.slack
        if not surrogate:
            return auc, viol, None, None
        glo, gup = np.array(glo), np.array(gup)
        if self.constraint == "continuous":
            g_auc, gl_c, gu_c = glo[0], glo[1:], gup[1:]
        else:
            g_auc, gl_c, gu_c = self.cell_shares_ @ glo, glo, gup
        Cp, Cm = np.clip(self.constraint_matrix_, 0, None), np.clip(-self.constraint_matrix_, 0, None)
        g_con = Cp @ gu_c - Cm @ gl_c
        return auc, viol, g_auc, g_con

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, *, sensitive_features, query_ids, sample_weight=None):
        """Train on the within-query pairs of (X, y). ``sample_weight``: optional positive row weights, e.g.
        inverse propensities of clicks; a pair then counts w_better * w_worse in every pairwise accuracy."""
        X, y, z, qcode = self._check(X, y, sensitive_features, query_ids)
        Q = int(qcode.max()) + 1 if qcode.size else 0
        weight = None
        if sample_weight is not None:
            weight = np.asarray(sample_weight, dtype=np.float64).ravel()
            if weight.size != y.size or not np.isfinite(weight).all() or (weight < 0).any():
                raise PairwiseFairnessError(f"sample_weight must be {y.size} finite weights >= 0")
        cells, names, shares, C, cnames = self._cells(y, z, qcode, Q, weight)
        self.samplers_, self.cells_, self.cell_shares_ = cells, names, shares
        self.constraint_matrix_, self.constraint_names_ = C, cnames
        self.n_features_in_ = X.shape[1]
        rng = np.random.default_rng(self.random_state)
        eval_sample = self._draw(rng, X, z, self.eval_pairs)
        p, m = X.shape[1], C.shape[0]
        w = np.zeros(p)
        w += 1e-3 * rng.standard_normal(p)
        M = np.full((m + 1, m + 1), 1.0 / (m + 1))
        lam = np.full(m + 1, 1.0 / (m + 1)) if m else np.ones(1)
        eta_l = self.learning_rate if self.lambda_learning_rate is None else self.lambda_learning_rate
        m1, m2 = np.zeros(p), np.zeros(p)
        every = max(1, self.n_iter // max(1, self.n_snapshots))
        snaps, hist = [], []
        for t in range(1, self.n_iter + 1):
            Ds = self._draw(rng, X, z, self.pairs_per_step)
            _, viol, g_auc, g_con = self._stats(Ds, w, surrogate=True)
            grad = lam[0] * (-g_auc + self.l2 * w)
            if m:
                grad = grad + lam[1:] @ g_con
            m1 = 0.9 * m1 + 0.1 * grad
            m2 = 0.999 * m2 + 0.001 * grad * grad
            w = w - self.learning_rate * (m1 / (1 - 0.9**t)) / (np.sqrt(m2 / (1 - 0.999**t)) + 1e-8)
            if m:
                g = np.r_[0.0, viol]
                M = M * np.exp(eta_l * np.outer(g, lam))
                M /= M.sum(axis=0, keepdims=True)
                lam = _stationary(M)
            if t % every == 0 or t == self.n_iter:
                auc, v, _, _ = self._stats(eval_sample, w, surrogate=False)
                snaps.append(w.copy())
                hist.append({"step": t, "auc": auc, "max_violation": float(v.max()) if m else 0.0,
                             "lambda_0": float(lam[0]), **{f"violation[{n}]": float(x) for n, x in zip(cnames, v)}})
        self.history_ = pd.DataFrame(hist)
        self.snapshot_coefs_ = np.array(snaps)
        auc = self.history_["auc"].to_numpy()
        worst = self.history_["max_violation"].to_numpy()
        ok = worst <= 0
        best = int(np.flatnonzero(ok)[np.argmax(auc[ok])]) if ok.any() else int(np.argmin(worst))
        self.coef_ = self.snapshot_coefs_[best]
        self.feasible_ = bool(ok.any())
        self.train_auc_, self.train_violation_ = float(auc[best]), float(worst[best])
        self.mixture_ = self._shrink(auc)
        del self.samplers_
        return self

    def _shrink(self, auc) -> pd.DataFrame:
        """Cotter et al.'s shrinking LP: max sum p_t AUC_t s.t. sum p_t viol_jt <= 0, p in the simplex."""
        V = self.history_[[c for c in self.history_.columns if c.startswith("violation[")]].to_numpy().T
        A_ub, b_ub = (V, np.zeros(V.shape[0])) if V.size else (None, None)
        res = linprog(-auc, A_ub=A_ub, b_ub=b_ub, A_eq=np.ones((1, auc.size)), b_eq=[1.0], bounds=(0, None),
                      method="highs")
        if res.status != 0:
            return pd.DataFrame({"snapshot": [int(np.argmax(auc))], "weight": [1.0]})
        keep = np.flatnonzero(res.x > 1e-9)
        return pd.DataFrame({"snapshot": keep, "weight": res.x[keep] / res.x[keep].sum()})

    # ------------------------------------------------------------------ scoring
    def decision_function(self, X) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise PairwiseFairnessError("PairwiseFairRanker is not fitted; call fit() first")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise PairwiseFairnessError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        return X @ self.coef_

    def score(self, X) -> np.ndarray:  # noqa: D102 - ranking score, not scikit-learn's accuracy
        """Ranking scores f(x) = x . coef_ (higher ranks first); same as `decision_function`."""
        return self.decision_function(X)


def _stationary(M: np.ndarray) -> np.ndarray:
    """Stationary distribution of a column-stochastic matrix (eigenvector of eigenvalue 1)."""
    vals, vecs = np.linalg.eig(M)
    v = np.abs(np.real(vecs[:, int(np.argmin(np.abs(vals - 1.0)))]))
    return v / v.sum()
