"""Query-structured data for the pairwise-fair ranker's evidence: simulator requests and Adult with synthetic queries.

Simulator: items of `ingestion.simulator` (features f0..f7, relevance Y(1) as the label, group "0"/"1");
one query per simulated request (its `slots` candidate items), training and held-out requests from
different days. The simulated continuous protected attribute is z = f0 - 0.6 Y = 2C + 0.5 Z, the group
and noise part of the Gaussian score component (it is what the production score rewards beyond merit).
Adult: the benchmark split with rows dealt at random into queries of `query_size` rows.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from fair_pipeline.ingestion.simulation_config import SimulationConfig
from fair_pipeline.ingestion.simulator import simulate_items, simulate_requests
from fair_pipeline.training.reference.data import adult_split


@dataclass(frozen=True)
class QuerySplit:
    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    groups_train: np.ndarray
    queries_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    groups_test: np.ndarray
    queries_test: np.ndarray
    z_train: np.ndarray | None = None
    z_test: np.ndarray | None = None


def simulator_queries(n_requests: int = 1500, slots: int = 20, n_items: int = 5000, seed: int = 0) -> QuerySplit:
    config = SimulationConfig(n_items=n_items, slots=slots, seed=seed)
    items = simulate_items(config)
    features = items[[f"f{k}" for k in range(config.n_features)]].to_numpy()
    relevance = items["relevance"].to_numpy()
    group = items["group_id"].to_numpy(dtype=object)
    z = items["f0"].to_numpy() - config.relevance_effect * relevance

    def day(d):
        r = simulate_requests(config, items, dt.date(2024, 1, d), "shuffle", n_requests, stream=1)
        i = r["item_index"]
        return features[i], relevance[i], group[i], r["request_index"], z[i]

    tr, te = day(1), day(2)
    return QuerySplit("simulator", *tr[:4], *te[:4], z_train=tr[4], z_test=te[4])


def adult_queries(query_size: int = 20, seed: int = 0) -> QuerySplit:
    split = adult_split()
    rng = np.random.default_rng(seed)
    q_tr = rng.permutation(split.y_train.size) // query_size
    q_te = rng.permutation(split.y_test.size) // query_size
    return QuerySplit("adult", split.X_train, split.y_train, split.groups_train, q_tr,
                      split.X_test, split.y_test, split.groups_test, q_te)
