"""Post-processing and pairwise-fair training, measured side by side.

    python benchmarks/postprocessing_comparison.py [--tables ABCDEF]

Prints four tables (held-out figures with 95 % CIs; SEs: rows independent for rates, queries for
pairwise accuracies, DeLong for xAUC; CPU seconds of this process, one BLAS thread):
  A. Adult and COMPAS, logistic-regression scores: ThresholdPostProcessor (equalized odds) vs Fairlearn's
     ThresholdOptimizer (same constraint, objective accuracy; skipped if fairlearn is absent): in-sample
     expected equalized-odds gap, held-out expected accuracy, held-out TPR / FPR gaps, fit CPU time.
  B. PairwiseFairRanker vs the same ranker unconstrained (constraint=None): held-out constrained gap and
     within-query AUC, on the simulator (queries = requests; cross-group, marginal, continuous on the
     simulated z) and on Adult with synthetic queries of 20 rows; fit CPU time.
  C. Reject option: the selected (threshold, margin) and the held-out parity gap vs the plain 0.5 threshold.
  D. Adult and COMPAS (synthetic queries of 20 held-out rows): logistic regression, EO transform
     (WeightedCDFTransformer), ThresholdPostProcessor (equalized odds), reject option (equal opportunity,
     bound 0.05), MI penalty (lambda 10), pairwise-fair ranker: TPR gap, pairwise cross-group gap, xAUC gap,
     accuracy and within-query AUC, each with its CI.
  E. Seed robustness on the simulator (seeds 0-3 of the population, the days and the optimizer): held-out
     cross-group gap and AUC, unconstrained vs hinge vs sigmoid surrogates.
  F. The pair budget: PairwiseFairRanker fit CPU time on Adult with queries of 20, 200 and 2,000 rows (the
     number of within-query pairs grows ~100-fold; the per-step budget keeps the cost flat), 300 steps.
Decisions: scores thresholded at 0.5 (LR, EO transform, MI penalty); the ranker's threshold gives the same
training selection rate as LR at 0.5; the post-processors use their own (expected) decisions and those
decision probabilities are their ranking scores.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from fair_pipeline.audit.stats.pairwise import pairwise_accuracies
from fair_pipeline.audit.stats.pairwise_gap import cross_group_gaps, marginal_gaps
from fair_pipeline.audit.stats.xauc import xauc
from fair_pipeline.eo import WeightedCDFTransformer
from fair_pipeline.postprocessing import RejectOptionClassifier, ThresholdPostProcessor, equalized_odds_gap, rate_table
from fair_pipeline.training import MIPenalizedLogisticRegression, PairwiseFairRanker
from fair_pipeline.training.pairwise_data import adult_queries, simulator_queries
from fair_pipeline.training.reference.data import adult_split, compas_split

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)


def timed(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def ci(est, se):
    return f"{est:+.4f} [{est - 1.96 * se:+.4f}, {est + 1.96 * se:+.4f}]"


def pm(est, se):
    return f"{est:.4f} [{est - 1.96 * se:.4f}, {est + 1.96 * se:.4f}]"


def exp_acc(p, y):
    return float(np.mean(np.where(y == 1, p, 1 - p)))


def rates(p, y, g):
    t = rate_table(p, y, g).set_index(["group", "metric"])
    diff = [k for k in t.index.get_level_values(0).unique() if " - " in str(k)][0]
    return t, diff


# ---------------------------------------------------------------------------------------- A
def table_a():
    rows = []
    for split in (adult_split(), compas_split()):
        lr = LogisticRegression(max_iter=2000).fit(split.X_train, split.y_train)
        s_tr, s_te = lr.predict_proba(split.X_train)[:, 1], lr.predict_proba(split.X_test)[:, 1]
        pp, cpu = timed(lambda: ThresholdPostProcessor("equalized_odds").fit(
            s_tr, split.y_train, sensitive_features=split.groups_train))
        p_tr = pp.predict_expected(s_tr, sensitive_features=split.groups_train)
        p_te = pp.predict_expected(s_te, sensitive_features=split.groups_test)
        methods = [("ThresholdPostProcessor", p_tr, p_te, cpu)]
        try:
            from fairlearn.postprocessing import ThresholdOptimizer
            to = ThresholdOptimizer(estimator=lr, constraints="equalized_odds", objective="accuracy_score",
                                    prefit=True, predict_method="predict_proba")
            _, fcpu = timed(lambda: to.fit(split.X_train, split.y_train, sensitive_features=split.groups_train))
            q_tr = to._pmf_predict(split.X_train, sensitive_features=split.groups_train)[:, 1]
            q_te = to._pmf_predict(split.X_test, sensitive_features=split.groups_test)[:, 1]
            methods.append(("Fairlearn ThresholdOptimizer", q_tr, q_te, fcpu))
        except ImportError:
            print("fairlearn not installed: its rows are skipped (pip install '.[bench]')")
        for name, a_tr, a_te, c in methods:
            t, diff = rates(a_te, split.y_test, split.groups_test)
            rows.append({"data": split.name, "method": name, "gaps": diff,
                         "EO gap in-sample": f"{equalized_odds_gap(a_tr, split.y_train, split.groups_train):.2e}",
                         "accuracy in-sample": f"{exp_acc(a_tr, split.y_train):.4f}",
                         "held-out accuracy": pm(t.loc[("all", "accuracy"), "estimate"], t.loc[("all", "accuracy"), "se"]),
                         "held-out TPR gap": ci(t.loc[(diff, "tpr"), "estimate"], t.loc[(diff, "tpr"), "se"]),
                         "held-out FPR gap": ci(t.loc[(diff, "fpr"), "estimate"], t.loc[(diff, "fpr"), "se"]),
                         "fit CPU s": f"{c:.3f}"})
        if len(methods) == 2:
            rows.append({"data": split.name, "method": "ours - Fairlearn",
                         "held-out accuracy": f"{exp_acc(p_te, split.y_test) - exp_acc(methods[1][2], split.y_test):+.4f}",
                         "fit CPU s": f"ratio {methods[0][3] / methods[1][3]:.2f}"})
    print("\nA. Equalized-odds derived predictor vs Fairlearn (logistic-regression scores)")
    print(pd.DataFrame(rows).fillna("").to_string(index=False))


# ---------------------------------------------------------------------------------------- B
def table_b():
    rows = []
    sim, adult = simulator_queries(), adult_queries()

    def fit(d, constraint, sens):
        return timed(lambda: PairwiseFairRanker(constraint=constraint, random_state=0).fit(
            d.X_train, d.y_train, sensitive_features=sens, query_ids=d.queries_train))

    def auc(m, d):
        o = pairwise_accuracies(m.score(d.X_test), d.y_test, d.groups_test, d.queries_test).overall.iloc[0]
        return o.accuracy, o.se

    def cross(m, d):
        r = cross_group_gaps(m.score(d.X_test), d.y_test, d.groups_test, d.queries_test).iloc[0]
        return r.gap, r.se, f"A_{{{r.group_a}>{r.group_b}}} - A_{{{r.group_b}>{r.group_a}}}"

    def marginal(m, d):
        r = marginal_gaps(m.score(d.X_test), d.y_test, d.groups_test, d.queries_test).iloc[0]
        return r.gap, r.se, f"A_{{{r.group_a}>:}} - A_{{{r.group_b}>:}}"

    def continuous(m, d):
        c = pairwise_accuracies(m.score(d.X_test), d.y_test, d.groups_test, d.queries_test,
                                continuous_feature=d.z_test).continuous.set_index("metric").loc["A_> - A_<"]
        return c.accuracy, c.se, "A_> - A_< (z)"

    cases = [(sim, "cross_group_equal_opportunity", sim.groups_train, cross),
             (sim, "marginal_equal_opportunity", sim.groups_train, marginal),
             (sim, "continuous", sim.z_train, continuous),
             (adult, "cross_group_equal_opportunity", adult.groups_train, cross)]
    plain_fits = {}
    for d, constraint, sens, gap in cases:
        if d.name not in plain_fits:
            plain_fits[d.name] = fit(d, None, d.groups_train)
        (m0, c0), (m1, c1) = plain_fits[d.name], fit(d, constraint, sens)
        g0, s0, label = gap(m0, d)
        g1, s1, _ = gap(m1, d)
        a0, a1 = auc(m0, d), auc(m1, d)
        rows.append({"data": d.name, "constraint (slack 0.02)": constraint, "gap": label,
                     "gap unconstrained": ci(g0, s0), "gap constrained": ci(g1, s1),
                     "|gap| ratio": f"{abs(g1) / abs(g0):.3f}",
                     "AUC unconstrained": pm(*a0), "AUC constrained": pm(*a1),
                     "AUC cost": f"{a0[0] - a1[0]:.4f}", "fit CPU s (unc / con)": f"{c0:.1f} / {c1:.1f}"})
    print("\nB. PairwiseFairRanker: held-out gap and within-query AUC, constrained vs unconstrained "
          f"(simulator: {sim.queries_test.max() + 1} held-out requests of 20; Adult: queries of 20 rows)")
    print(pd.DataFrame(rows).to_string(index=False))


# ---------------------------------------------------------------------------------------- C / D
def side_by_side(split, query_size=20, seed=0):
    rng = np.random.default_rng(seed)
    q_te = rng.permutation(split.y_test.size) // query_size
    q_tr = rng.permutation(split.y_train.size) // query_size
    y, g = split.y_test, split.groups_test
    lr = LogisticRegression(max_iter=2000).fit(split.X_train, split.y_train)
    s_tr, s_te = lr.predict_proba(split.X_train)[:, 1], lr.predict_proba(split.X_test)[:, 1]
    out = {"logistic regression": (s_te, (s_te >= 0.5).astype(float))}
    eo = WeightedCDFTransformer().fit(s_tr, split.groups_train, clicks=split.y_train)
    e_te = np.asarray(eo.transform(s_te, sensitive_features=g), dtype=float).ravel()
    out["EO transform (alpha 1)"] = (e_te, (e_te >= 0.5).astype(float))
    pp = ThresholdPostProcessor("equalized_odds").fit(s_tr, split.y_train, sensitive_features=split.groups_train)
    p = pp.predict_expected(s_te, sensitive_features=g)
    out["ThresholdPostProcessor (EO)"] = (p, p)
    # reject option: label 1 must be the favourable outcome (COMPAS: no recidivism)
    fav = split.name == "adult"
    rs_tr, rs_te = (s_tr, s_te) if fav else (1 - s_tr, 1 - s_te)
    ry_tr = split.y_train if fav else 1 - split.y_train
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ro = RejectOptionClassifier(metric="equal_opportunity", bound=0.05).fit(
            rs_tr, ry_tr, sensitive_features=split.groups_train)
    d = ro.predict(rs_te, sensitive_features=g).astype(float)
    d = d if fav else 1 - d
    out["reject option (EOpp, 0.05)"] = (d, d)
    mi = MIPenalizedLogisticRegression(lam=10.0, l2=1e-4).fit(split.X_train, split.y_train,
                                                              sensitive_features=split.groups_train)
    m_te = mi.predict_proba(split.X_test)[:, 1]
    out["MI penalty (lambda 10)"] = (m_te, (m_te >= 0.5).astype(float))
    rk = PairwiseFairRanker(random_state=0).fit(split.X_train, split.y_train, sensitive_features=split.groups_train,
                                                query_ids=q_tr)
    r_tr, r_te = rk.score(split.X_train), rk.score(split.X_test)
    cut = np.quantile(r_tr, 1 - np.mean(s_tr >= 0.5))
    out["pairwise-fair ranker (slack .02)"] = (r_te, (r_te >= cut).astype(float))
    rows = []
    for name, (score, dec) in out.items():
        t, diff = rates(dec, y, g)
        pg = cross_group_gaps(score, y, g, q_te).iloc[0]
        xd = xauc(score, y, g).deltas.iloc[0]
        auc = pairwise_accuracies(score, y, g, q_te).overall.iloc[0]
        rows.append({"method": name,
                     f"TPR gap ({diff})": ci(t.loc[(diff, "tpr"), "estimate"], t.loc[(diff, "tpr"), "se"]),
                     f"pairwise gap A_{{{pg.group_a}>{pg.group_b}}}-A_{{{pg.group_b}>{pg.group_a}}}": ci(pg.gap, pg.se),
                     f"xAUC gap ({xd.group_a},{xd.group_b})": ci(xd.delta, xd.se),
                     "accuracy": pm(t.loc[("all", "accuracy"), "estimate"], t.loc[("all", "accuracy"), "se"]),
                     "within-query AUC": pm(auc.accuracy, auc.se)})
    return pd.DataFrame(rows), ro


def table_e():
    rows = []
    for seed in range(4):
        d = simulator_queries(seed=seed)
        row = {"seed": seed}
        for label, constraint, surrogate in (("unconstrained", None, "hinge"),
                                             ("hinge", "cross_group_equal_opportunity", "hinge"),
                                             ("sigmoid", "cross_group_equal_opportunity", "sigmoid")):
            m = PairwiseFairRanker(constraint, surrogate=surrogate, random_state=seed).fit(
                d.X_train, d.y_train, sensitive_features=d.groups_train, query_ids=d.queries_train)
            s = m.score(d.X_test)
            r = cross_group_gaps(s, d.y_test, d.groups_test, d.queries_test).iloc[0]
            auc = pairwise_accuracies(s, d.y_test, d.groups_test, d.queries_test).overall.iloc[0].accuracy
            row[f"{label} gap"] = ci(r.gap, r.se)
            row[f"{label} AUC"] = f"{auc:.3f}"
            if constraint:
                row[f"{label} feasible"] = m.feasible_
        rows.append(row)
    print("\nE. Simulator seeds: held-out cross-group gap A_{0>1} - A_{1>0} (slack 0.02) and within-query AUC")
    print(pd.DataFrame(rows).to_string(index=False))


def table_f():
    rows = []
    for size in (20, 200, 2000):
        d = adult_queries(query_size=size)
        y, q = d.y_train.astype(bool), d.queries_train
        pos, neg = np.bincount(q, weights=y), np.bincount(q, weights=~y)
        _, cpu = timed(lambda: PairwiseFairRanker(random_state=0, n_iter=300).fit(
            d.X_train, d.y_train, sensitive_features=d.groups_train, query_ids=q))
        rows.append({"query size": size, "queries": q.max() + 1, "within-query pairs": f"{(pos * neg).sum():,.0f}",
                     "pairs drawn (300 steps x 4 cells x 1000)": "1,200,000", "fit CPU s": f"{cpu:.2f}"})
    print("\nF. Pair budget: fit cost against the number of within-query pairs (Adult training split)")
    print(pd.DataFrame(rows).to_string(index=False))


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="ABCDEF", help="which tables to print (default ABCDEF: all)")
    tables = set(parser.parse_args(argv).tables.upper())
    with threadpool_limits(1):
        if "A" in tables:
            table_a()
        if "B" in tables:
            table_b()
        for split in (adult_split(), compas_split()) if tables & {"C", "D"} else ():
            df, ro = side_by_side(split)
            print(f"\nC. Reject option on {split.name}: threshold {ro.threshold_:.3f}, margin {ro.margin_:.3f}, "
                  f"privileged {ro.privileged_!r}, training |TPR gap| {abs(ro.metric_value_):.4f}, "
                  f"balanced accuracy {ro.balanced_accuracy_:.4f}, feasible {ro.feasible_}")
            print(f"\nD. Side by side on the {split.name} held-out split ({split.y_test.size} rows, "
                  f"synthetic queries of 20 rows for the pairwise figures); 95 % CIs")
            print(df.to_string(index=False))
        if "E" in tables:
            table_e()
        if "F" in tables:
            table_f()


if __name__ == "__main__":
    main()
