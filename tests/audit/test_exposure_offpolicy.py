"""Off-policy exposure parity: a candidate re-ranks the logged requests; exposure reads the new slots, merit the
logged clicks. Checked by brute force (the re-ranking), by identity (re-ranking in the logged order is the logged
parity) and against the truth of a simulated examination model (unbiased ratio, CI coverage over fresh logs)."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.audit.exposure_offpolicy import offpolicy_exposure, reranked_positions, sampled_requests
from fair_pipeline.audit.sql import UNKNOWN_GROUP, AuditDataError
from fair_pipeline.platform.windows import PartitionWindow

W = 1.0 / np.log2(1.0 + np.arange(1, 9))
DAY = dt.date(2026, 1, 3)


def test_reranking_hands_out_the_logged_slots_in_score_order():
    rng = np.random.default_rng(0)
    request = np.repeat([f"r{i}" for i in range(40)], 6)
    position = np.concatenate([rng.permutation([1, 2, 3, 5, 8, 9]) for _ in range(40)])  # gaps in the page kept
    score = rng.integers(0, 3, request.size).astype(float)  # many ties
    got = reranked_positions(request, position, score)
    for r in np.unique(request):
        m = request == r
        order = sorted(range(m.sum()), key=lambda i: (-score[m][i], position[m][i]))  # ties: logged order
        want = np.empty(m.sum(), dtype=int)
        want[order] = np.sort(position[m])
        np.testing.assert_array_equal(got[m], want)


def test_missing_scores_are_named():
    with pytest.raises(AuditDataError, match="1 scores are missing"):
        reranked_positions(["a", "a"], [1, 2], [0.3, np.nan])


def _log(rng, n_items=150, requests=600, slots=8, boost=0.0):
    """Shown pages of a shuffled logged ranking; clicks ~ Bernoulli(w_logged_slot * relevance)."""
    group = rng.choice(["a", "b", "c"], n_items, p=[0.5, 0.3, 0.2])
    rel = rng.uniform(0.1, 0.7, n_items) * np.where(group == "c", 0.6, 1.0)
    shown = np.argsort(rng.random((requests, n_items)), axis=1)[:, :slots]  # distinct items per request
    frame = pd.DataFrame({"request_id": np.repeat([f"q{q}" for q in range(requests)], slots), "item": shown.ravel(),
                          "position": np.tile(np.arange(1, slots + 1), requests)})
    frame["item_id"] = "item-" + frame["item"].astype(str)
    frame["group"] = group[frame["item"]]
    frame["rel"] = rel[frame["item"]]
    frame["click"] = (rng.random(len(frame)) < W[frame["position"] - 1] * frame["rel"]).astype(int)
    frame["feature"] = frame["rel"] + np.where(frame["group"] == "b", boost, 0.0)  # the candidate's score
    return frame


def test_reranking_in_the_logged_order_is_the_logged_parity():
    frame = _log(np.random.default_rng(1))
    got = offpolicy_exposure(frame, {"same": lambda f: -f["position"].to_numpy(float)}, W)["same"]
    want = exposure_parity(frame["position"], frame["click"], frame["group"], W,
                           clusters={"item_id": frame["item_id"], "request_id": frame["request_id"]})
    for name in ("per_group", "pairs"):
        g, w = getattr(got, name), getattr(want, name)
        numeric = [c for c in w.columns if w[c].dtype.kind == "f"]
        np.testing.assert_allclose(g[numeric].to_numpy(float), w[numeric].to_numpy(float), rtol=1e-12)


def _true_ratio(frame: pd.DataFrame, ranked: np.ndarray) -> pd.Series:
    """Exposure per unit of true merit (mean relevance) of each group, over vs a's."""
    per = frame.assign(w=W[ranked - 1]).groupby("group")[["w", "rel"]].mean()
    ratio = per["w"] / per["rel"]
    return ratio / ratio["a"]


def test_candidate_ratio_is_unbiased_and_its_interval_covers_the_truth():
    """Fresh item pools and logs each replication; the candidate ranks by relevance with group b boosted.
    Truth: the candidate's own exposure of the shown items per unit of their true relevance."""
    hits, errors, boosted = [], [], []
    for seed in range(150):
        frame = _log(np.random.default_rng(100 + seed), boost=0.15)
        result = offpolicy_exposure(frame, {"cand": lambda f: f["feature"].to_numpy()}, W)["cand"]
        truth = _true_ratio(frame, reranked_positions(frame["request_id"], frame["position"], frame["feature"]))
        pairs = result.pairs.set_index("group")
        for g in ("b", "c"):
            hits.append(pairs.loc[g, "ci_low"] <= truth[g] <= pairs.loc[g, "ci_high"])
            errors.append(np.log(pairs.loc[g, "ratio"]) - np.log(truth[g]))
        boosted.append(truth["b"])
    coverage = np.mean(hits)
    assert 0.90 <= coverage <= 0.99, coverage
    assert abs(np.mean(errors)) < 0.03, np.mean(errors)  # log-ratio bias small against its SE (~0.1)
    # the boosted group gets more exposure per merit than a (under the logged shuffle both get ~1): a real change
    assert np.mean(boosted) > 1.05, np.mean(boosted)


def test_one_failing_candidate_is_named_and_the_others_stand():
    frame = _log(np.random.default_rng(2), requests=200)
    got = offpolicy_exposure(frame, {"bad": lambda f: np.full(len(f), np.nan), "ok": lambda f: f["feature"].to_numpy()}, W)
    assert isinstance(got["bad"], str) and "bad" in got["bad"]
    assert set(got["ok"].per_group["group"]) == {"a", "b", "c"}


@pytest.fixture()
def warehouse():
    frame = _log(np.random.default_rng(3), requests=120).drop(columns=["rel", "feature", "item"])
    frame = frame.rename(columns={"group": "group_id"}).assign(partition_date=DAY, policy="production", score=0.5)
    frame.loc[frame["item_id"] == frame["item_id"].iloc[0], "group_id"] = None
    other = frame.assign(partition_date=DAY - dt.timedelta(days=1), request_id="old-" + frame["request_id"])
    items = frame[["item_id"]].drop_duplicates().assign(**{"quality 'q'": lambda f: np.arange(len(f), dtype=float)})
    con = duckdb.connect()
    con.execute("CREATE SCHEMA staging")
    for name, data in (("stg_observational_impressions", pd.concat([frame, other])), ("stg_items", items)):
        con.register("f", data)
        con.execute(f"CREATE TABLE staging.{name} AS SELECT * FROM f")
        con.unregister("f")
    yield con, frame
    con.close()


def test_sampled_requests_are_a_bounded_deterministic_sample_with_features(warehouse):
    con, frame = warehouse
    window = PartitionWindow(DAY, DAY, (DAY,))
    rows, total = sampled_requests(con, window, ["quality 'q'"], max_requests=50)
    again, _ = sampled_requests(con, window, ["quality 'q'"], max_requests=50)
    assert total == 120 and rows["request_id"].nunique() == 50
    pd.testing.assert_frame_equal(rows, again)
    assert not rows["request_id"].str.startswith("old-").any()  # only the window's days
    assert (rows.groupby("request_id").size() == 8).all()  # every shown item of a chosen request
    assert UNKNOWN_GROUP in set(rows["group"]) or UNKNOWN_GROUP not in set(frame["group_id"].fillna(UNKNOWN_GROUP))
    with pytest.raises(AuditDataError, match="not columns of staging.stg_items"):
        sampled_requests(con, window, ["nope"])
