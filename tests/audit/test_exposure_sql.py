"""The warehouse path of the logged ranking's exposure parity equals the array path (DuckDB)."""
from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import exposure_parity
from fair_pipeline.audit.exposure_sql import logged_exposure_parity
from fair_pipeline.audit.sql import UNKNOWN_GROUP, AuditDataError
from fair_pipeline.platform.windows import PartitionWindow

DAY = dt.date(2026, 1, 3)
W = 1.0 / np.log2(1.0 + np.arange(1, 9))


def _impressions(seed=0, requests=300):
    rng = np.random.default_rng(seed)
    items = pd.DataFrame({"item_id": [f"it'{i}" for i in range(90)],
                          "group_id": rng.choice(['Nord "Küste"', "south+east", "東京", None], 90, p=[0.4, 0.3, 0.2, 0.1]),
                          "rel": rng.uniform(0.1, 0.6, 90)})
    rows = []
    for q in range(requests):
        shown = rng.choice(90, 8, replace=False)
        for pos, i in enumerate(shown, start=1):
            rows.append((f"req-{q}", items.item_id[i], items.group_id[i], pos, int(rng.random() < W[pos - 1] * items.rel[i])))
    frame = pd.DataFrame(rows, columns=["request_id", "item_id", "group_id", "position", "click"])
    frame["partition_date"] = DAY
    return frame


@pytest.fixture()
def con():
    con = duckdb.connect()
    frame = _impressions()
    other_day = _impressions(1).assign(partition_date=DAY - dt.timedelta(days=1))
    con.execute("CREATE SCHEMA staging")
    con.register("f", pd.concat([frame, other_day]))
    con.execute("CREATE TABLE staging.stg_observational_impressions AS SELECT * FROM f")
    con.unregister("f")
    yield con, frame
    con.close()


@pytest.mark.parametrize("clusters", [(), ("item_id",), ("request_id",), ("item_id", "request_id")])
def test_sql_path_equals_the_array_path(con, clusters):
    con, frame = con
    window = PartitionWindow(DAY, DAY, (DAY,))
    got = logged_exposure_parity(con, window, W, clusters=clusters, pairs="all")
    groups = frame["group_id"].fillna(UNKNOWN_GROUP)
    want = exposure_parity(frame["position"], frame["click"], groups, W, pairs="all",
                           clusters={c: frame[c] for c in clusters} or None)
    for name in ("per_group", "pairs"):
        g, w = getattr(got, name), getattr(want, name)
        assert g["group"].tolist() == w["group"].tolist()
        numeric = [c for c in g.columns if g[c].dtype.kind == "f"]
        np.testing.assert_allclose(g[numeric].to_numpy(float), w[numeric].to_numpy(float), rtol=1e-9, atol=1e-12)
    assert UNKNOWN_GROUP in got.per_group["group"].tolist()
    assert got.variance_estimand == want.variance_estimand


def test_empty_window_is_named(con):
    con, _ = con
    day = DAY + dt.timedelta(days=5)
    with pytest.raises(AuditDataError, match="no observational impressions"):
        logged_exposure_parity(con, PartitionWindow(day, day, (day,)), W)
