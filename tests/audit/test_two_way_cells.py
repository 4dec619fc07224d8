"""Two-way (item x query) audit of a file: intersection cells looked up by item and query codes (`CellCodes`), the
query stream's per-band sums, against the in-memory audit that sorts rows by cluster; ids as real logs write them."""
import numpy as np
import pandas as pd
import pytest

import fair_pipeline.audit.files as files
import fair_pipeline.audit.prefix_stream as prefix_stream
from fair_pipeline.audit import audit_aggregates
from fair_pipeline.audit.stats.repeated_cells import StreamCellCodes
from fair_pipeline.audit.stats.singleton_cells import SINGLE, CellCodes
from fair_pipeline.audit.stats.validation import AuditInputError
from tests.audit.tables import assert_reports_close

ITEMS = np.array(['it "quoted"', "a+b", "товар", "<b>&amp;</b>", "商品", "x'y", "", " "] +
                 [f"item {v}" for v in range(120)], dtype=object)
QUERIES = np.array(["q+1", 'say "hi"', "запрос", "<script>", "検索"] + [f"query {v}" for v in range(40)], dtype=object)
GROUPS = np.array(['a "quoted"', "b+", "в"], dtype=object)


def test_cell_codes_give_each_listed_cell_its_code_and_others_single():
    rng = np.random.default_rng(3)
    first, second = rng.integers(0, 500, 300), rng.integers(0, 70, 300)
    keys = np.unique(first * 70 + second)
    first, second = np.divmod(keys, 70)
    codes = rng.permutation(keys.size)
    cells = CellCodes(first, second, codes, 70)
    a, b = rng.integers(0, 500, 5000), rng.integers(0, 70, 5000)
    a[:keys.size], b[:keys.size] = first, second  # every listed cell looked up at least once
    want = dict(zip(zip(first.tolist(), second.tolist()), codes.tolist()))
    expected = [want.get((x, y), SINGLE) for x, y in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(cells.lookup(a, b), expected)
    np.testing.assert_array_equal(CellCodes([], [], [], 70).lookup(a, b), np.full(a.size, SINGLE))
    with pytest.raises(ValueError, match="once"):
        CellCodes([1, 1], [2, 2], [0, 1], 70)



def test_stream_cell_codes_number_the_repeated_cells_as_first_met():
    rng = np.random.default_rng(8)
    item, query = rng.integers(-20, 40, 4000), rng.integers(10**12, 10**12 + 90, 4000)  # ids less lo: the keys
    keys = (item + 20) * 90 + (query - 10**12)
    cells = StreamCellCodes(keys.copy(), 90, lo=(-20, 10**12))
    counts = {}
    for key in keys.tolist():
        counts[key] = counts.get(key, 0) + 1
    repeated = {k for k, c in counts.items() if c > 1}
    assert cells.size == len(repeated) and 50 < len(repeated) < len(counts)
    order = {}  # the codes the stream gives, batch after batch: first met, first numbered
    for lo in range(0, 4000, 333):
        got = cells.lookup(item[lo:lo + 333], query[lo:lo + 333])
        for key, code in zip(keys[lo:lo + 333].tolist(), got.tolist()):
            if key in repeated:
                order.setdefault(key, len(order))
            assert code == (order[key] if key in repeated else SINGLE)
    assert sorted(order.values()) == list(range(len(repeated)))


def _frame(rng, n, ties):
    item = rng.integers(0, ITEMS.size - 2, n)
    query = rng.integers(0, QUERIES.size - 1, n)
    effect = rng.normal(size=ITEMS.size)[item]
    y = rng.random(n) < 1 / (1 + np.exp(-effect))
    s = effect + y + rng.normal(scale=0.7, size=n)
    s = np.round(s * ties) / ties if ties else s
    frame = pd.DataFrame({"score": s, "label": y.astype(int), "grp": GROUPS[rng.integers(0, 3, n)],
                          "item": ITEMS[item], "query": QUERIES[query]})
    repeats = frame.sample(n // 10, random_state=1).assign(score=lambda d: d["score"] + 0.01)  # cells shown again
    lone = pd.DataFrame({"score": [0.3], "label": [1], "grp": [GROUPS[0]], "item": [ITEMS[-2]],
                         "query": [QUERIES[-1]]})  # a query of one row, whose item appears in no other query
    only = frame.head(3).assign(item=ITEMS[-1], query=QUERIES[0])  # an item shown three times in one query
    return pd.concat([frame, repeats, lone, only], ignore_index=True)


@pytest.mark.parametrize("ids", ["text", "integer"])  # integer: numbered in the stream, cells keyed by the ids
@pytest.mark.parametrize("ties", [0, 2])  # 0: distinct scores, the rows are sorted; 2: GROUP BY score, cell, codes
def test_two_way_file_audit_equals_the_sort_by_cluster_audit(tmp_path, monkeypatch, ties, ids):
    monkeypatch.setattr(prefix_stream, "CLUSTER_FEED_ROWS", 97)
    frame = _frame(np.random.default_rng(21), 1500, ties)
    if ids == "integer":  # negative ids, gaps between them
        frame["item"] = 3 * pd.Index(ITEMS).get_indexer(frame["item"]) - 50
        frame["query"] = pd.Index(QUERIES).get_indexer(frame["query"]) + 10**12  # (a tight range: per-band sums)
    keyed = []
    monkeypatch.setattr(files, "integer_cells", lambda *a: keyed.append(1) or prefix_stream.integer_cells(*a))
    cells = frame.groupby(["item", "query"]).size()
    assert (cells > 1).sum() >= 50 and (cells == 1).sum() >= 500
    path = tmp_path / "two way + cells.parquet"
    frame.to_parquet(path)
    got = files.audit_file(path, "score", "label", "grp", clusters=["item", "query"], batch_rows=61).report
    assert len(keyed) == (ids == "integer")
    aggregates = frame.assign(n_pos=frame["label"], n_neg=1 - frame["label"]).rename(columns={"grp": "group"})
    want = audit_aggregates(aggregates, cluster_cols=["item", "query"], estimand="two_way")
    assert_reports_close(got, want)


@pytest.mark.parametrize("column", ["item", "query"])
def test_a_null_item_or_query_id_is_named(tmp_path, column):
    frame = _frame(np.random.default_rng(5), 300, 0)
    frame.loc[7, column] = None
    path = tmp_path / "nulls.parquet"
    frame.to_parquet(path)
    with pytest.raises(AuditInputError, match=r"--cluster column \['item', 'query'\]: 1 NULL"):
        files.audit_file(path, "score", "label", "grp", clusters=["item", "query"])
