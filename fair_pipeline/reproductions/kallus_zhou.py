"""Kallus & Zhou (2019), Table 1, logistic-regression rows, on the shipped Adult and COMPAS data.

Protocol (paper, section 5): logistic regression on the covariates, random 70/30 train/test
splits, metrics on the test part, averaged over splits. Our preprocessing:

* Adult: the 30,162 complete rows of ``adult.data`` (the paper's n); Y = 1 for income > 50K;
  a = Black, b = White. Features: the six numeric columns standardized plus one-hot encodings of
  the eight categorical columns (workclass, education, marital status, occupation, relationship,
  race, sex, native country).
* COMPAS: ProPublica's filtered two-year file (6,172 rows; the paper's 6,167 follow Friedler et
  al.); Y = 1 for no recidivism within two years (``two_year_recid == 0``); a = African-American,
  b = Caucasian. Features (Friedler et al.'s set, without the COMPAS scores): sex, age, age
  category, race, juvenile felony / misdemeanour / other counts, priors count, charge degree and
  one-hot charge description.

Run ``python -m fair_pipeline.reproductions.kallus_zhou [n_splits]`` for the README table.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from fair_pipeline.audit.stats import build_grid
from fair_pipeline.audit.stats.grid_audit import run_grid_audit
from fair_pipeline.audit.stats.validation import as_groups
from fair_pipeline.audit.stats.xauc import xauc_tables
from fair_pipeline.datasets import load_adult, load_compas

PAPER = {  # Table 1, logistic regression: AUC^a, AUC^b, xAUC(a, b), xAUC(b, a)
    "adult": (0.923, 0.898, 0.865, 0.944),
    "compas": (0.737, 0.701, 0.604, 0.813),
}


def adult_design():
    df = load_adult("train").dropna().reset_index(drop=True)
    numeric = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
    categorical = ["workclass", "education", "marital_status", "occupation", "relationship",
                   "race", "sex", "native_country"]
    return df[numeric + categorical], df["income_gt_50k"].to_numpy(), df["race"].to_numpy(), \
        numeric, categorical, ("Black", "White")


def compas_design():
    df = load_compas(filtered=True).reset_index(drop=True)
    numeric = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]
    categorical = ["sex", "age_cat", "race", "c_charge_degree", "c_charge_desc"]
    X = df[numeric + categorical].copy()
    X["c_charge_desc"] = X["c_charge_desc"].fillna("(missing)")
    y = (df["two_year_recid"] == 0).astype(int).to_numpy()
    return X, y, df["race"].to_numpy(), numeric, categorical, ("African-American", "Caucasian")


DESIGNS = {"adult": adult_design, "compas": compas_design}


def one_split(dataset: str, seed: int) -> dict:
    """Fit on 70%, audit the 30% test part: within-group AUCs and xAUCs with DeLong SEs."""
    X, y, race, numeric, categorical, (a, b) = DESIGNS[dataset]()
    Xtr, Xte, ytr, yte, _, rte = train_test_split(X, y, race, test_size=0.3, random_state=seed)
    model = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), numeric),
                           ("cat", OneHotEncoder(handle_unknown="ignore"), categorical)]),
        LogisticRegression(max_iter=2000, C=1.0),
    )
    score = model.fit(Xtr, ytr).predict_proba(Xte)[:, 1]
    keep = np.isin(rte, [a, b])
    codes, levels = as_groups(rte[keep], int(keep.sum()))
    res = run_grid_audit(build_grid(score[keep], yte[keep] == 1, codes, levels), [1.0], xauc=True)
    x = xauc_tables(res, min_count=10)
    auc = dict(zip(res["groups"], res["auc"][: len(levels), -1]))
    se = dict(zip(res["groups"], np.sqrt(res["variance"][: len(levels), -1])))
    pairs = x.pairs.set_index(["group_a", "group_b"])
    return {"auc_a": auc[a], "auc_b": auc[b], "xauc_ab": pairs.loc[(a, b), "xauc"],
            "xauc_ba": pairs.loc[(b, a), "xauc"], "se_auc_a": se[a], "se_auc_b": se[b],
            "se_xauc_ab": pairs.loc[(a, b), "se"], "se_xauc_ba": pairs.loc[(b, a), "se"]}


def reproduce(dataset: str, n_splits: int = 10, seed: int = 0) -> pd.DataFrame:
    """One row per split; average the columns for the table."""
    return pd.DataFrame([one_split(dataset, seed + k) for k in range(n_splits)])


def markdown_table(n_splits: int = 20) -> str:
    lines = ["| dataset (a, b) | | AUC^a | AUC^b | xAUC(a,b) | xAUC(b,a) |", "|---|---|---|---|---|---|"]
    for name, label in (("adult", "Adult (Black, White)"), ("compas", "COMPAS (Black, White)")):
        runs = reproduce(name, n_splits)
        mean = runs.mean()
        sd = runs.std(ddof=1)
        cols = ["auc_a", "auc_b", "xauc_ab", "xauc_ba"]
        lines.append(f"| {label} | ours, mean of {n_splits} splits | "
                     + " | ".join(f"{mean[c]:.3f}" for c in cols) + " |")
        lines.append("| | split-to-split SD / mean DeLong SE | "
                     + " | ".join(f"{sd[c]:.3f} / {mean['se_' + c]:.3f}" for c in cols) + " |")
        lines.append("| | Kallus & Zhou, Table 1 | " + " | ".join(f"{v:.3f}" for v in PAPER[name]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
