"""The optimized SQL path of audit_file: same numbers as the landed code and brute force; bounded inputs.

`data/ties_groups_expected.json` holds `audit_file(...).to_dict(curves=True)` of `data/ties_groups.csv` (4 groups,
one small, ties within and across groups, a stretch of distinct scores) computed by the code before the sweep
was vectorized and before rows were streamed sorted (commit 0d0b576), iid and item-clustered. The iid outputs
must still equal it; their normal intervals add ``df`` = inf. Item-clustered variances now carry the CR2
small-sample correction (new SEs, t intervals with ``df``, cluster counts), so those runs are compared with the
in-memory aggregate path (`audit_aggregates`) instead, and their cluster counts with a count from the rows.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fair_pipeline.audit.files as files
from fair_pipeline.audit import AuditInputError, audit_aggregates
from fair_pipeline.audit.files import audit_file
from fair_pipeline.commands import main
from fair_pipeline.audit.stats import grid_audit, sweep
from fair_pipeline.audit.stats.blocks import SortedCellBlocks
from tests.audit import bruteforce

DATA = Path(__file__).parent / "data"
EXPECTED = json.loads((DATA / "ties_groups_expected.json").read_text())
VARIANCES = {"iid": {}, "item_clustered": {"clusters": ["item"]}}


def main_audit(argv: list[str]) -> int:
    return main(["audit", *argv])


def _worst_difference(got, want, where="") -> float:
    """Largest absolute difference between two JSON trees; structure, strings and NaNs must match exactly."""
    if isinstance(want, dict):
        assert set(got) == set(want), where
        return max([_worst_difference(got[k], want[k], f"{where}/{k}") for k in want] + [0.0])
    if isinstance(want, list):
        assert len(got) == len(want), where
        return max([_worst_difference(g, w, f"{where}[{i}]") for i, (g, w) in enumerate(zip(got, want))] + [0.0])
    if isinstance(want, float) and isinstance(got, (int, float)):
        assert np.isnan(got) == np.isnan(want), where
        return 0.0 if np.isnan(want) else abs(got - want)
    assert got == want, (where, got, want)
    return 0.0


@pytest.mark.parametrize("variance", sorted(VARIANCES))
@pytest.mark.parametrize("sort_rows_share", [0.0, np.inf], ids=["sorted rows", "group by score"])
@pytest.mark.parametrize("batch_rows", [97, files.BATCH_ROWS])
def test_optimized_path_equals_the_landed_code(monkeypatch, variance, sort_rows_share, batch_rows):
    monkeypatch.setattr(files, "SORT_ROWS_SHARE", sort_rows_share)  # force either query shape
    monkeypatch.setattr(sweep, "RESULT_COLUMNS", 7)  # the 25 columns finished in several steps
    monkeypatch.setattr(sweep, "DENSE_ROWS", 0 if batch_rows == 97 else 8)  # the sparse products too
    if batch_rows == files.BATCH_ROWS:  # one batch of ~900 blocks swept in chunks of 13 (the chunking of update_columns)
        monkeypatch.setattr(grid_audit, "CHUNK_BLOCKS", 13)
    audit = audit_file(DATA / "ties_groups.csv", "score", "label", "grp", batch_rows=batch_rows, **VARIANCES[variance])
    got = audit.to_dict(curves=True)
    got["file"] = "ties_groups.csv"
    got = json.loads(json.dumps(got, default=float))
    if variance == "iid":
        assert got.pop("comparisons") == {"mode": "all", "reference": None, "pairs": 6}  # 4 groups: all pairs
        new_keys = _keys_missing_from(EXPECTED[variance], got)
        assert new_keys == {"/groups[]/df", "/overall[]/df", "/pairs[]/df", "/xauc/deltas[]/df",
                            "/xauc/balanced_deltas[]/df", "/xauc/balanced[]/df0", "/xauc/balanced[]/df1"}
        assert all(v is None for v in _values_at(got, new_keys))  # JSON writes the non-finite df as null ...
        report = audit.report  # ... which is +inf: normal intervals, no clusters
        for table, columns in [(report.groups, ["df"]), (report.overall, ["df"]), (report.pairs, ["df"]),
                               (report.xauc.deltas, ["df"]), (report.xauc.balanced_deltas, ["df"]),
                               (report.xauc.balanced, ["df0", "df1"])]:
            assert np.isposinf(table[columns].to_numpy(float)).all()
        assert _worst_difference(_without(got, new_keys), EXPECTED[variance]) <= 1e-12
        return
    frame = pd.read_csv(DATA / "ties_groups.csv")
    rows = pd.DataFrame({"score": frame["score"], "n_pos": frame["label"], "n_neg": 1 - frame["label"],
                         "group": frame["grp"], "item": frame["item"]})
    want = audit_aggregates(rows, cluster_cols="item", estimand="clustered").to_dict(curves=True)
    want = json.loads(json.dumps(want, default=float))
    got_report = {k: got[k] for k in want}
    assert {"/groups[]/df", "/groups[]/clusters_pos", "/groups[]/clusters_neg"} <= _keys_missing_from({}, got_report)
    assert _worst_difference(got_report, want) <= 1e-12
    holding = {g: (d.loc[d["label"] == 1, "item"].nunique(), d.loc[d["label"] == 0, "item"].nunique())
               for g, d in frame.groupby("grp")}
    for row in got["groups"]:
        assert (row["clusters_pos"], row["clusters_neg"]) == holding[row["group"]]
        assert row["se"] is None or 1 <= row["df"] < min(holding[row["group"]]), row  # t below its clusters
    for row in got["overall"]:
        assert (row["clusters_pos"], row["clusters_neg"]) == (frame.loc[frame["label"] == 1, "item"].nunique(),
                                                              frame.loc[frame["label"] == 0, "item"].nunique())


def _paths(tree, where=""):
    """Every key path of a JSON tree, list positions written as []."""
    if isinstance(tree, dict):
        return {p for k, v in tree.items() for p in {f"{where}/{k}"} | _paths(v, f"{where}/{k}")}
    if isinstance(tree, list):
        return {p for v in tree for p in _paths(v, f"{where}[]")}
    return set()


def _keys_missing_from(reference, got) -> set:
    return _paths(got) - _paths(reference)


def _values_at(tree, paths, where=""):
    if isinstance(tree, dict):
        return [x for k, v in tree.items() for x in ([v] if f"{where}/{k}" in paths else _values_at(v, paths, f"{where}/{k}"))]
    if isinstance(tree, list):
        return [x for v in tree for x in _values_at(v, paths, f"{where}[]")]
    return []


def _without(tree, paths, where=""):
    if isinstance(tree, dict):
        return {k: _without(v, paths, f"{where}/{k}") for k, v in tree.items() if f"{where}/{k}" not in paths}
    if isinstance(tree, list):
        return [_without(v, paths, f"{where}[]") for v in tree]
    return tree


def test_optimized_path_equals_brute_force_per_group_and_xauc(monkeypatch):
    monkeypatch.setattr(files, "SORT_ROWS_SHARE", 0.0)
    frame = pd.read_csv(DATA / "ties_groups.csv")
    report = audit_file(DATA / "ties_groups.csv", "score", "label", "grp", batch_rows=61).report
    pos = {g: d.loc[d["label"] == 1, "score"].to_numpy() for g, d in frame.groupby("grp")}
    neg = {g: d.loc[d["label"] == 0, "score"].to_numpy() for g, d in frame.groupby("grp")}
    at_one = report.groups[report.groups["cutoff"] == 1.0].set_index("group")
    for g in pos:
        assert abs(at_one.loc[g, "auc"] - bruteforce.auc(pos[g], neg[g])) <= 1e-12
        assert abs(at_one.loc[g, "se"] ** 2 - bruteforce.delong_var(pos[g], neg[g])) <= 1e-12
    pairs = report.xauc.pairs.set_index(["group_a", "group_b"])
    for a in pos:
        for b in pos:
            if a != b and pairs.loc[(a, b), "estimable"]:
                assert abs(pairs.loc[(a, b), "xauc"] - bruteforce.auc(pos[a], neg[b])) <= 1e-12
                assert abs(pairs.loc[(a, b), "variance"] - bruteforce.delong_var(pos[a], neg[b])) <= 1e-12


@pytest.mark.parametrize("repeats_first", [True, False])
def test_sort_or_group_is_chosen_from_the_whole_file_not_its_first_rows(tmp_path, monkeypatch, repeats_first):
    """A file written with its repeated scores first (here 40% zeros, then distinct scores) is still mostly
    distinct: the rows are sorted, not grouped (a prefix of its rows holds only zeros). 80% repeats: grouped."""
    rng = np.random.default_rng(11)
    n = 300_000
    chosen, stream_grid = [], files._stream_grid
    monkeypatch.setattr(files, "_stream_grid", lambda *a: chosen.append(a[-1]) or stream_grid(*a))
    for zeros, sorted_rows in ((0.4, True), (0.8, False)):
        scores = np.r_[np.zeros(int(zeros * n)), rng.normal(size=n - int(zeros * n))]
        if not repeats_first:
            rng.shuffle(scores)
        path = tmp_path / f"zeros_{zeros}.parquet"
        pd.DataFrame({"score": scores, "label": rng.integers(0, 2, n)}).to_parquet(path)
        audit_file(path, "score", "label")
        assert chosen.pop() == sorted_rows


def test_null_groups_are_still_refused_with_their_count(tmp_path):
    frame = pd.read_csv(DATA / "ties_groups.csv")
    frame.loc[[3, 50, 400], "grp"] = None
    frame.to_parquet(tmp_path / "nulls.parquet")
    with pytest.raises(AuditInputError, match="'grp': 3 rows with NULL group"):
        audit_file(tmp_path / "nulls.parquet", "score", "label", "grp")


@pytest.mark.parametrize("weighted", [False, True])
def test_sorted_cell_blocks_equal_a_group_by_across_any_batch_split(weighted):
    rng = np.random.default_rng(3)
    n, n_cells = 2000, 6
    scores = -np.sort(-np.round(rng.normal(size=n), 1))  # descending, many ties
    cells = rng.integers(0, n_cells, n)
    counts = rng.integers(1, 5, n).astype(float) if weighted else np.ones(n)
    levels = np.unique(scores)[::-1]
    want = np.zeros((n_cells, levels.size))
    np.add.at(want, (cells, np.searchsorted(-levels, -scores)), counts)  # naive GROUP BY score, cell
    cuts = np.sort(rng.choice(np.arange(1, n), 40, replace=False))
    blocks = SortedCellBlocks(n_cells)
    outs = [blocks.push(scores[a:b], cells[a:b], counts[a:b] if weighted else None)
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, n])] + [blocks.finish()]
    got_scores = np.concatenate([o[0] for o in outs if o is not None])
    got = np.hstack([o[1] for o in outs if o is not None])
    np.testing.assert_array_equal(got_scores, levels)  # a tie split by a batch edge is still one block
    np.testing.assert_array_equal(got, want)


def _many_groups_csv(path: Path, n_groups: int) -> Path:
    rng = np.random.default_rng(0)
    pd.DataFrame({"score": rng.normal(size=n_groups), "label": rng.integers(0, 2, n_groups),
                  "grp": [f"g{i}" for i in range(n_groups)]}).to_csv(path, index=False)
    return path


def test_4000_groups_give_one_clear_line_fast_not_an_out_of_memory(tmp_path):
    path = _many_groups_csv(tmp_path / "groups.csv", 4000)
    with pytest.raises(AuditInputError, match=r"'grp' has 4000 groups, more than max_groups=50 .*--max-groups"):
        audit_file(path, "score", "label", "grp")
    # the CLI in a child process (as users run it), under a 2-minute limit: one line, exit status 2
    done = subprocess.run([sys.executable, "-m", "fair_pipeline.commands", "audit", str(path), "--score", "score",
                           "--label", "label", "--group", "grp"], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "4000 groups, more than max_groups=50" in done.stderr


def test_max_groups_is_configurable():
    with pytest.raises(AuditInputError, match="has 4 groups, more than max_groups=3"):
        audit_file(DATA / "ties_groups.csv", "score", "label", "grp", max_groups=3)
    report = audit_file(DATA / "ties_groups.csv", "score", "label", "grp", max_groups=4).report
    assert set(report.groups["group"]) == {"a", "b", "c", "d"} and len(report.xauc.pairs) == 4 * 3


@pytest.mark.parametrize("path", ["s3://bucket/scored.parquet", "http://example.com/x.csv",
                                  "https://example.com/x.parquet", "gs://b/part-*.parquet"])
def test_remote_paths_are_refused_unless_enabled(path, capsys):
    with pytest.raises(AuditInputError, match="remote paths are refused; pass allow_remote=True"):
        audit_file(path, "score", "label")
    assert main_audit([path, "--score", "score", "--label", "label"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, message", [
    ("--min-count", "-5", "argument --min-count: expected an integer >= 2, got '-5'"),
    ("--min-count", "x", "argument --min-count: expected an integer >= 2"),
    ("--confidence", "2", "argument --confidence: expected a number in (0.5, 1)"),
    ("--confidence", "nan", "argument --confidence: expected a number in (0.5, 1)"),
    ("--max-groups", "0", "argument --max-groups: expected an integer >= 1"),
    ("--memory-limit", "2GB'; SELECT 1; --", "argument --memory-limit: expected a size such as 2GB"),
    ("--cutoffs", "a,b", "--cutoffs must be comma-separated numbers"),
    ("--margin", "xauc", "--margin must be METRIC=VALUE"),
])
def test_cli_options_are_validated_with_one_line(option, value, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main_audit([str(DATA / "ties_groups.csv"), "--score", "score", "--label", "label", option, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.parametrize("kwargs, message", [
    ({"min_count": 1}, "min_count .* must be an integer >= 2"),
    ({"confidence": 1.0}, r"confidence .* must be in \(0.5, 1\)"),
    ({"memory_limit": "lots"}, "memory_limit .* must be a size"),
    ({"max_groups": 0}, "max_groups .* must be an integer >= 1"),
    ({"cutoffs": [0.1, 1.5]}, r"cutoffs must lie in \(0, 1\]"),
])
def test_api_options_are_validated(kwargs, message):
    with pytest.raises(AuditInputError, match=message):
        audit_file(DATA / "ties_groups.csv", "score", "label", "grp", **kwargs)
