"""The kill points of benchmarks/kill_points.py (no pipeline run here; test_kill_recovery.py runs some of them)."""
from __future__ import annotations

import random

from benchmarks.kill_harness import ALL_STEPS, FIXED_POINTS
from benchmarks.kill_points import choose_points
from fair_pipeline.definitions import defs

RUN_JOBS = ("ingest_logs", "benchmark_models", "train_and_audit")  # what `fair-pipeline run --benchmarks` executes


def test_the_points_name_every_step_of_the_run_and_only_real_steps():
    # A renamed asset would leave a point that is never reached; a new asset, a step no point covers.
    steps = {node.name for job in RUN_JOBS for node in defs.resolve_job_def(job).graph.node_defs}
    assert set(ALL_STEPS) == steps
    assert len({p.name for p in FIXED_POINTS}) == len(FIXED_POINTS)


def test_twenty_points_are_the_fixed_ones_then_seeded_random_steps_and_moments():
    points = choose_points(20, random.Random(19), clean_s=30.0)
    assert [p.name for p in points[: len(FIXED_POINTS)]] == [p.name for p in FIXED_POINTS]
    extra = points[len(FIXED_POINTS):]
    assert len(extra) == 4
    assert [bool(p.steps) for p in extra] == [True, False, True, False]  # a random step, then a random moment
    assert all(p.steps <= set(ALL_STEPS) and 0 <= p.delay_s <= 1.5 for p in extra[::2])
    assert all(2 <= p.delay_s <= 27 for p in extra[1::2])
    assert [p.name for p in choose_points(20, random.Random(19), 30.0)] == [p.name for p in points]
    assert [p.name for p in choose_points(3, random.Random(19), 30.0)] == [p.name for p in FIXED_POINTS[:3]]
