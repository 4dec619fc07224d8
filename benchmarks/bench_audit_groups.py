"""Peak memory and time of `fair-pipeline audit` as the number of groups grows.

For each group count (default 25, 100, 200) a CSV of ``--rows`` rows (default 1e5; continuous scores, labels
~30% positive, groups of equal expected size) is written to a temp dir and ``fair-pipeline audit FILE --score
score --label label --group grp --max-groups G --json`` runs in a child process; we print its peak resident
memory (the child's own rusage), wall and CPU time, and per group count the increments. The output's pairwise
tables hold groups^2 rows (xAUC of every ordered pair, with its xROC curve), so some growth in groups^2 is the
output itself; what must not happen is growth in groups x rows or groups x distinct scores.

``--baseline DIR`` also runs the same command with DIR first on the Python path (e.g. a checkout of the landed
code) in the same rounds, side by side.

    python benchmarks/bench_audit_groups.py
    python benchmarks/bench_audit_groups.py --groups 25,100 --baseline /path/to/other/checkout
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, rows: int, groups: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, rows)
    y = rng.random(rows) < 0.3
    pd.DataFrame({"score": rng.normal(size=rows) + y, "label": y.astype(int),
                  "grp": np.char.add("g", g.astype(str))}).to_csv(path, index=False)


def run_child(code_root: Path, path: Path, groups: int) -> dict:
    """Peak RSS (MB), wall and CPU seconds of one `fair-pipeline audit` child process."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    entry = "fair_pipeline.commands" if (code_root / "fair_pipeline" / "commands").is_dir() else "fair_pipeline.cli"
    cmd = [sys.executable, "-m", entry, "audit", str(path), "--score", "score", "--label", "label",
           "--group", "grp", "--json"]
    if code_root == ROOT:
        cmd += ["--max-groups", str(groups)]
    start = time.perf_counter()
    with open(os.devnull, "w") as sink:
        child = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env, cwd=code_root)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err = child.stderr.read().decode()
    if child.returncode != 0:
        raise SystemExit(f"audit failed ({child.returncode}) with {groups} groups: {err.strip()[-500:]}")
    return {"rss_mb": usage.ru_maxrss / 1024, "wall_s": time.perf_counter() - start,
            "cpu_s": usage.ru_utime + usage.ru_stime}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e5)
    parser.add_argument("--groups", default="25,100,200", help="comma-separated group counts")
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side (e.g. the landed code)")
    args = parser.parse_args(argv)
    counts = [int(v) for v in args.groups.split(",")]
    roots = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    print(f"# fair-pipeline audit, {int(args.rows):,} rows; load average {os.getloadavg()[0]:.1f}")
    print(f"{'code':<10}{'groups':>7}{'peak RSS MB':>13}{'wall s':>9}{'cpu s':>8}")
    with tempfile.TemporaryDirectory(prefix="bench_audit_groups_") as tmp:
        for groups in counts:
            path = Path(tmp) / f"groups_{groups}.csv"
            write_csv(path, int(args.rows), groups)
            for name, root in roots.items():
                r = run_child(root, path, groups)
                print(f"{name:<10}{groups:>7}{r['rss_mb']:>13.0f}{r['wall_s']:>9.1f}{r['cpu_s']:>8.1f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
