"""Integer cluster ids numbered as the score-ordered stream meets them (`stats.first_seen_codes`) against the SQL
numbering of the same clusters written as text ids (quotes, `+`, non-Latin, HTML): every table equal to 1e-12."""
import numpy as np
import pandas as pd
import pytest

import fair_pipeline.audit.files as files
import fair_pipeline.audit.prefix_stream as prefix_stream
from fair_pipeline.audit.stats import AuditInputError
from fair_pipeline.audit.stats.first_seen_codes import FirstSeenCodes, fits_lookup_table
from tests.audit.tables import assert_reports_close

GROUPS = np.array(['a "quoted"', "b+", "в"], dtype=object)
TEXT = ['it "{}"', "+{}", "товар {}", "<b>{}</b>&amp;"]


def test_codes_follow_first_appearance_across_batches():
    codes = FirstSeenCodes(-5, 20)
    np.testing.assert_array_equal(codes(np.array([7, -5, 7, 20, -5])), [0, 1, 0, 2, 1])
    np.testing.assert_array_equal(codes(np.array([3, 20, 3, 3, 0])), [3, 2, 3, 3, 4])
    np.testing.assert_array_equal(codes(np.zeros(0, dtype=np.int64)), [])
    assert codes.count == 5
    with pytest.raises(AuditInputError, match="outside the range"):
        codes(np.array([21]))
    with pytest.raises(AuditInputError, match="outside the range"):
        codes(np.array([-6]))


def test_many_new_ids_in_one_batch_get_distinct_dense_codes():
    rng = np.random.default_rng(3)
    ids = rng.integers(1_000, 3_000, 50_000)
    numbering = FirstSeenCodes(1_000, 2_999)
    got = np.concatenate([numbering(part) for part in np.array_split(ids, 7)])
    uniq, first = np.unique(ids, return_index=True)
    assert numbering.count == uniq.size
    assert np.array_equal(np.sort(np.unique(got)), np.arange(uniq.size))
    # one code per id and one id per code
    assert pd.Series(got).groupby(ids).nunique().max() == 1 and pd.Series(ids).groupby(got).nunique().max() == 1
    # numbered in order of first appearance
    np.testing.assert_array_equal(got[np.sort(first)], np.arange(uniq.size))


def test_lookup_table_only_for_compact_ranges():
    assert fits_lookup_table(0, 399, 100) and not fits_lookup_table(0, 400, 100)
    assert not fits_lookup_table(0, 2**40, 10**12) and not fits_lookup_table(0, 0, 0)


def _frame(rng, n, ids):
    effect = rng.normal(size=ids.max() + 1)[ids]
    y = rng.random(n) < 1 / (1 + np.exp(-effect))
    s = np.round((effect + y + rng.normal(scale=0.7, size=n)) * 3) / 3 + rng.normal(scale=1e-3, size=n) * (n % 2)
    return pd.DataFrame({"score": s, "label": y.astype(int), "grp": GROUPS[rng.integers(0, 3, n)]})


def _audit(path):
    return files.audit_file(path, "score", "label", "grp", clusters="item", batch_rows=53).report


@pytest.mark.parametrize("case", ["repeated", "one_row_each", "sparse_ids", "negative_ids"])
@pytest.mark.parametrize("n", [1500, 1501])  # even: tied scores (GROUP BY score); odd: distinct (sorted rows)
def test_integer_ids_equal_text_ids(tmp_path, monkeypatch, case, n):
    monkeypatch.setattr(prefix_stream, "CLUSTER_FEED_ROWS", 97)  # clusters straddle feeds
    rng = np.random.default_rng(n)
    ids = np.arange(n) if case == "one_row_each" else rng.integers(0, 120, n)
    frame = _frame(rng, n, ids)
    stored = {"repeated": ids, "one_row_each": ids, "sparse_ids": ids * 10**9 + 7, "negative_ids": ids - 60}[case]
    frame["item"] = stored.astype(np.int64)
    numbered = []
    monkeypatch.setattr(files, "FirstSeenCodes", lambda lo, hi: numbered.append((lo, hi)) or FirstSeenCodes(lo, hi))
    frame.to_parquet(tmp_path / "int ids.parquet")
    got = _audit(tmp_path / "int ids.parquet")
    assert bool(numbered) == (case != "sparse_ids")  # ids spread wider than the rows are numbered in SQL
    frame["item"] = [TEXT[v % len(TEXT)].format(v) for v in ids]
    frame.to_parquet(tmp_path / "text ids.parquet")
    want = _audit(tmp_path / "text ids.parquet")
    assert got.groups["clusters"].iloc[0] == np.unique(ids).size
    assert_reports_close(got, want)


def test_one_integer_cluster_is_refused_like_a_text_one(tmp_path):
    rng = np.random.default_rng(5)
    frame = _frame(rng, 300, np.zeros(300, dtype=int)).assign(item=np.int32(42))
    frame.to_parquet(tmp_path / "one.parquet")
    with pytest.raises(AuditInputError, match="at least 2 clusters"):
        _audit(tmp_path / "one.parquet")


def test_null_integer_ids_are_named(tmp_path):
    rng = np.random.default_rng(6)
    frame = _frame(rng, 300, rng.integers(0, 30, 300)).assign(item=pd.array(rng.integers(0, 30, 300), dtype="Int64"))
    frame.loc[[3, 9], "item"] = pd.NA
    frame.to_parquet(tmp_path / "null ids.parquet")
    with pytest.raises(AuditInputError, match=r"--cluster column \['item'\]: 1 NULL values in group"):
        _audit(tmp_path / "null ids.parquet")
