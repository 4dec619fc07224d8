"""Model-ready Adult and COMPAS splits as preprocessed in Nandy et al., section 4.1.

Adult: ``adult.data`` restricted to native_country == United-States (29,170 rows), categorical
columns one-hot encoded with the census "?" left as all-zero dummies: exactly the paper's
29,170 x 65 matrix. The United-States dummy is constant after the filter and is dropped (64 used).
Held-out split: the US rows of ``adult.test`` (14,662). Protected characteristic: sex.

COMPAS: ProPublica's filtered two-year file (``load_compas(filtered=True)``, 6,172 rows) restricted
to African-American and Caucasian defendants (5,278); label ``two_year_recid``. Features: age, sex,
prior and juvenile counts, charge degree and log jail days. Race is the group, not a feature
(the penalized setting has no protected attribute at prediction time), and the COMPAS decile
score is not a feature (it is the commercial model's output). Held-out split: stratified 30 % by
(race, label) with a fixed seed.

Numeric columns are standardized with training means / standard deviations.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fair_pipeline.datasets import load_adult, load_compas

ADULT_NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
ADULT_CATEGORICAL = (
    "workclass", "education", "marital_status", "occupation", "relationship", "race", "sex",
    "native_country",
)
COMPAS_GROUPS = ("African-American", "Caucasian")


@dataclass(frozen=True)
class BenchmarkSplit:
    """Train / held-out arrays for one benchmark. ``groups_*`` hold the protected characteristic."""

    name: str
    feature_names: list[str]
    X_train: np.ndarray
    y_train: np.ndarray
    groups_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    groups_test: np.ndarray

    def summary(self) -> pd.DataFrame:
        """Rows and positive rate per (split, group): the sample sizes behind every figure."""
        parts = []
        for split, y, g in (("train", self.y_train, self.groups_train), ("test", self.y_test, self.groups_test)):
            frame = pd.DataFrame({"group": g, "y": y})
            agg = frame.groupby("group")["y"].agg(n="size", positives="sum").reset_index()
            agg.insert(0, "split", split)
            parts.append(agg)
        return pd.concat(parts, ignore_index=True)


def adult_split(root=None) -> BenchmarkSplit:
    train = _adult_us(load_adult("train", root=root))
    test = _adult_us(load_adult("test", root=root))
    X_train = _adult_dummies(train)
    if X_train.shape != (29_170, 65):
        raise ValueError(f"Adult US one-hot matrix is {X_train.shape}, the paper has (29170, 65)")
    X_train = X_train.loc[:, X_train.nunique() > 1]  # the United-States dummy is constant
    X_test = _adult_dummies(test).reindex(columns=X_train.columns, fill_value=0)
    return _standardized(
        "adult", X_train, X_test, ADULT_NUMERIC,
        train["income_gt_50k"].to_numpy(), test["income_gt_50k"].to_numpy(),
        train["sex"].to_numpy(dtype=object), test["sex"].to_numpy(dtype=object),
    )


def compas_split(test_fraction: float = 0.3, seed: int = 0, root=None) -> BenchmarkSplit:
    frame = load_compas(filtered=True, root=root)
    frame = frame[frame["race"].isin(COMPAS_GROUPS)].reset_index(drop=True)
    jail_days = (frame["c_jail_out"] - frame["c_jail_in"]).dt.total_seconds() / 86_400
    features = pd.DataFrame(
        {
            "age": frame["age"].astype(float),
            "priors_count": frame["priors_count"].astype(float),
            "juv_fel_count": frame["juv_fel_count"].astype(float),
            "juv_misd_count": frame["juv_misd_count"].astype(float),
            "juv_other_count": frame["juv_other_count"].astype(float),
            "log_jail_days": np.log1p(jail_days.clip(lower=0).fillna(0.0)),
            "sex_male": (frame["sex"] == "Male").astype(float),
            "charge_felony": (frame["c_charge_degree"] == "F").astype(float),
        }
    )
    y = frame["two_year_recid"].to_numpy()
    groups = frame["race"].to_numpy(dtype=object)
    is_test = _stratified_holdout(groups, y, test_fraction, seed)
    numeric = ("age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count", "log_jail_days")
    return _standardized(
        "compas", features[~is_test], features[is_test], numeric,
        y[~is_test], y[is_test], groups[~is_test], groups[is_test],
    )


def _adult_us(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["native_country"] == "United-States"].reset_index(drop=True)


def _adult_dummies(frame: pd.DataFrame) -> pd.DataFrame:
    # NA ("?") rows get all-zero dummies (get_dummies default), which yields the paper's 65 columns.
    return pd.get_dummies(
        frame[list(ADULT_NUMERIC + ADULT_CATEGORICAL)], columns=list(ADULT_CATEGORICAL), dtype=float
    ).astype(float)


def _stratified_holdout(groups, y, fraction, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    is_test = np.zeros(len(y), dtype=bool)
    for key in sorted({(g, int(v)) for g, v in zip(groups, y)}):
        idx = np.flatnonzero((groups == key[0]) & (y == key[1]))
        is_test[rng.choice(idx, size=int(round(fraction * idx.size)), replace=False)] = True
    return is_test


def _standardized(name, X_train, X_test, numeric, y_train, y_test, g_train, g_test) -> BenchmarkSplit:
    X_train, X_test = X_train.copy(), X_test.copy()
    cols = [c for c in numeric if c in X_train.columns]
    mean, std = X_train[cols].mean(), X_train[cols].std(ddof=0)
    X_train[cols] = (X_train[cols] - mean) / std
    X_test[cols] = (X_test[cols] - mean) / std
    return BenchmarkSplit(
        name, list(X_train.columns),
        X_train.to_numpy(dtype=float), np.asarray(y_train, dtype=int), g_train,
        X_test.to_numpy(dtype=float), np.asarray(y_test, dtype=int), g_test,
    )
