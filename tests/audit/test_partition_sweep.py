"""The sweep of score-range partitions, each from its offsets, merged (`stats.partition_sweep`) equals the
sequential audit of the same rows (`audit_aggregates`) to 1e-12: ties, three groups, empty partitions,
partitions without negatives or without a group, cutoffs crossed anywhere (also in the first block)."""
import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError, audit_aggregates
from fair_pipeline.audit.stats import StreamingAudit
from fair_pipeline.audit.stats.partition_sweep import (
    PartitionSweep,
    merge_partition_states,
    partition_blocks,
    partition_offsets,
)
from tests.audit.tables import assert_tables_close

CUTS = [0.0001, 0.05, 0.1, 0.3, 1.0]
GROUPS = np.array(['a "quoted"', "b+", "в"], dtype=object)


def _rows(rng, n: int, ties: bool) -> pd.DataFrame:
    g = rng.integers(0, 3, n)
    score = rng.normal(size=n) + 0.4 * g
    return pd.DataFrame({"group": GROUPS[g], "score": score.round(1) if ties else score,
                         "n_pos": rng.integers(0, 3, n), "n_neg": rng.integers(0, 3, n)})


def _partitioned_report(df: pd.DataFrame, bounds, cutoffs=CUTS):
    """Cut the rows at descending score ``bounds`` (a score equal to a bound goes below it, so ties stay in
    one partition), shuffle each partition's rows, sweep each from its offsets and merge."""
    groups = np.unique(df["group"].to_numpy(dtype=object))
    codes = np.searchsorted(groups, df["group"].to_numpy(dtype=object))
    part = np.searchsorted(-np.asarray(bounds, dtype=float), -df["score"].to_numpy(), side="right")
    P = len(bounds) + 1
    counts = np.zeros((2, P, groups.size))
    np.add.at(counts[0], (part, codes), df["n_pos"].to_numpy(float))
    np.add.at(counts[1], (part, codes), df["n_neg"].to_numpy(float))
    pos_above, neg_above = partition_offsets(counts[0], counts[1])
    n_pos, n_neg = counts[0].sum(axis=0), counts[1].sum(axis=0)
    rng = np.random.default_rng(3)
    states = []
    for p in range(P):
        rows = rng.permutation(np.flatnonzero(part == p))
        sweep = PartitionSweep(groups, n_pos, n_neg, cutoffs, pos_above[p], neg_above[p])
        sweep.update_columns(*partition_blocks(df["score"].to_numpy()[rows], codes[rows],
                                               df["n_pos"].to_numpy()[rows], df["n_neg"].to_numpy()[rows], groups.size))
        states.append(sweep.state())
    merged = merge_partition_states(StreamingAudit(groups, n_pos, n_neg, cutoffs), states)
    return merged.report()


def _equal(got, want) -> None:
    for name in ("groups", "pairs", "overall"):
        assert_tables_close(getattr(got, name), getattr(want, name), name)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas", "curves"):
        assert_tables_close(getattr(got.xauc, name), getattr(want.xauc, name), f"xauc.{name}")


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n_parts", [1, 2, 7, 40])
def test_merged_partitions_equal_the_sequential_sweep(ties, n_parts):
    rng = np.random.default_rng(21)
    df = _rows(rng, 3_000, ties)
    scores = np.sort(df["score"].unique())[::-1]
    bounds = scores[np.linspace(1, scores.size - 1, n_parts - 1).astype(int)] if n_parts > 1 else []
    _equal(_partitioned_report(df, bounds), audit_aggregates(df, CUTS))


def test_empty_partitions_and_partitions_of_one_class():
    rng = np.random.default_rng(4)
    df = _rows(rng, 800, ties=True)
    top = df["score"].max()
    df.loc[df["score"] == top, "n_neg"] = 0  # the top partition holds positives only
    bounds = [top + 2.0, top + 1.0, top - 0.05, top - 0.05 - 1e-9, -10.0]  # empty above, between and below
    _equal(_partitioned_report(df, bounds), audit_aggregates(df, CUTS))


def test_states_out_of_order_are_refused():
    rng = np.random.default_rng(5)
    df = _rows(rng, 300, ties=False)
    groups = np.unique(df["group"])
    codes = np.searchsorted(groups, df["group"])
    n_pos = np.bincount(codes, df["n_pos"], minlength=3)
    n_neg = np.bincount(codes, df["n_neg"], minlength=3)
    hi = df["score"].to_numpy() > 0
    states = []
    for rows, above in ((hi, np.zeros(3)), (~hi, None)):
        pos_above = np.zeros(3) if above is not None else np.bincount(codes[hi], df["n_pos"][hi], minlength=3)
        neg_above = np.zeros(3) if above is not None else np.bincount(codes[hi], df["n_neg"][hi], minlength=3)
        sweep = PartitionSweep(groups, n_pos, n_neg, CUTS, pos_above, neg_above)
        sweep.update_columns(*partition_blocks(df["score"][rows], codes[rows], df["n_pos"][rows], df["n_neg"][rows], 3))
        states.append(sweep.state())
    with pytest.raises(AuditInputError, match="descending score order"):
        merge_partition_states(StreamingAudit(groups, n_pos, n_neg, CUTS), states[::-1])
