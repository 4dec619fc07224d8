"""The exact sweep of `StreamingAudit` from score-range partitions swept independently (e.g. on Spark executors).

Rows range-partitioned by descending score, with every distinct score inside one partition, are swept in
parallel: partition p starts from its offsets, the positives and negatives of every group in the partitions
above it (the prefix sums of a few per-partition counts), so each of its blocks sits at its true place on
every ROC curve. What a partition hands back (`PartitionSweep.state`) is a few arrays of (columns x cutoffs)
and (vectors x vectors), whatever its rows: its running sums over its own blocks, the sums before each
cutoff it crosses (with the straddling block's share, all at global positions) and the xAUC cross moments.

`merge_partition_states` adds them up in score order: a cutoff crossed in partition p takes the running sums
of every partition above p plus p's own sums before the crossing, i.e. what one sequential sweep over all
blocks holds there (`sweep.RocSweep`). The merged audit reports the same numbers as the sequential one, up
to the order of floating-point additions (tests/audit/test_partition_sweep.py).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.aggregate import StreamingAudit
from fair_pipeline.audit.stats.validation import AuditInputError

_CROSSED = ("a1", "a2", "s1", "s2", "roc_at", "tpr_lin", "pos_through")  # RocSweep fields set where a cutoff is crossed


def partition_offsets(pos_counts, neg_counts) -> tuple[np.ndarray, np.ndarray]:
    """Per partition in descending score order ((P, G) positives and negatives per group): the positives and
    negatives of every group above it, (P, G) each (exclusive prefix sums)."""
    pos, neg = np.asarray(pos_counts, dtype=np.float64), np.asarray(neg_counts, dtype=np.float64)
    above = [np.vstack([np.zeros((1, c.shape[1])), np.cumsum(c, axis=0)[:-1]]) for c in (pos, neg)]
    return above[0], above[1]


def partition_blocks(scores, group_codes, n_pos, n_neg, n_groups: int):
    """A partition's rows (any order) as distinct-score blocks in descending order: (scores (B,), positives
    (G, B), negatives (G, B)); -0.0 and +0.0 are one block."""
    scores = np.asarray(scores, dtype=np.float64) + 0.0
    values, inverse = np.unique(scores, return_inverse=True)
    B = values.size
    block = B - 1 - inverse.ravel()
    cell = np.asarray(group_codes, dtype=np.intp) * B + block
    pos = np.bincount(cell, np.asarray(n_pos, dtype=np.float64), minlength=n_groups * B).reshape(n_groups, B)
    neg = np.bincount(cell, np.asarray(n_neg, dtype=np.float64), minlength=n_groups * B).reshape(n_groups, B)
    return values[::-1], pos, neg


class PartitionSweep:
    """The sweep of one score-range partition: `StreamingAudit` arguments (the global group totals) plus the
    partition's ``pos_above`` / ``neg_above`` per group; `update_columns` its blocks in descending order."""

    def __init__(self, groups, n_pos, n_neg, cutoffs, pos_above, neg_above):
        self.stream = StreamingAudit(groups, n_pos, n_neg, cutoffs)
        sweep = self.stream.audit.sweep
        pos_above, neg_above = np.asarray(pos_above, dtype=np.float64), np.asarray(neg_above, dtype=np.float64)
        sweep.p_above = np.r_[pos_above, pos_above.sum()]
        sweep.n_above = np.r_[neg_above, neg_above.sum()]
        # a cutoff whose threshold lies above this partition was crossed in an earlier one
        sweep.neg_done = sweep.x < sweep.n_above[:, None]

    def update_columns(self, scores, pos, neg, keep_curves: bool = False):
        return self.stream.update_columns(scores, pos, neg, keep_curves)

    def state(self) -> dict[str, np.ndarray]:
        """What the merge needs: sizes (columns x cutoffs) and (vectors x vectors), not rows."""
        audit, sweep = self.stream.audit, self.stream.audit.sweep
        out = {f"run{t}": sweep.run[t] for t in range(4)}
        out.update({name: getattr(sweep, name) for name in _CROSSED})
        out.update(done=sweep.done, cross_pos=audit.cross_pos, cross_neg=audit.cross_neg,
                   last_score=np.array([self.stream.last_score]))
        return out


def merge_partition_states(stream: StreamingAudit, states: list[dict]) -> StreamingAudit:
    """Load into the fresh ``stream`` (made with the global totals and cutoffs) the partitions' states, given
    in descending score order; its `report` is then the audit of all their blocks."""
    audit, sweep = stream.audit, stream.audit.sweep
    if sweep.done.any() or any(r.any() for r in sweep.run):
        raise AuditInputError("merge_partition_states needs a stream that has not been fed")
    i, j = sweep.col_pos[:, None], sweep.col_neg[:, None]  # (S, 1): the vectors of each column
    run = [np.zeros_like(r) for r in sweep.run]
    last = np.inf
    for state in states:
        if state["last_score"][0] > last and np.isfinite(state["last_score"][0]):
            raise AuditInputError("partition states must arrive in descending score order")
        if np.isfinite(state["last_score"][0]):
            last = state["last_score"][0]
        here = np.asarray(state["done"], dtype=bool)
        if (here & sweep.done).any():
            raise AuditInputError("a cutoff was crossed in two partitions: their offsets do not chain")
        # sums over the partitions above, per column, broadcast over the cutoffs
        before = ((run[0][j, i], run[1][j, i], run[2][i, j], run[3][i, j]) if sweep.dense
                  else tuple(r[:, None] for r in run))  # per-column sums (few compared pairs)
        for name, prior in zip(("a1", "a2", "s1", "s2"), before):
            getattr(sweep, name)[here] = (state[name] + prior)[here]
        for name in ("roc_at", "tpr_lin", "pos_through"):
            getattr(sweep, name)[here] = state[name][here]
        sweep.done |= here
        for t in range(4):
            run[t] += state[f"run{t}"]
        audit.cross_pos += state["cross_pos"]
        audit.cross_neg += state["cross_neg"]
    sweep.run = run
    sweep.neg_done[:] = True
    stream.last_score = last
    return stream
