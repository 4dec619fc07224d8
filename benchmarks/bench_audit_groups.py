"""Peak memory, time and JSON size of `fair-pipeline audit` as the number of groups grows.

For each group count (default 200, 1,000, 5,000) a CSV of ``--rows`` rows (default 1e5: a day's rows spread
over the groups; continuous scores, labels ~30% positive, groups of equal expected size) is written to a temp
dir and ``fair-pipeline audit FILE --score score --label label --group grp --max-groups G --json --compare C``
runs in a child process, for C = reference (each group with the largest; the default beyond a few groups) and,
up to ``--all-up-to`` groups, C = all (every pair). We print the child's peak resident memory (its own
rusage), wall and CPU time, the bytes of JSON it wrote and the pairs compared, and per mode the growth of
memory and JSON from one group count to the next beside the growth of groups: with a reference both grow like
the groups (comparisons = groups - 1), with all pairs like groups^2.

``--baseline DIR`` also runs the same command with DIR first on the Python path (e.g. a checkout of the landed
code; without --compare, i.e. its own default) in the same rounds, side by side.

    python benchmarks/bench_audit_groups.py
    python benchmarks/bench_audit_groups.py --groups 25,100 --baseline /path/to/other/checkout
"""
from __future__ import annotations

import argparse
import json
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


def run_child(code_root: Path, path: Path, groups: int, compare: str | None) -> dict:
    """Peak RSS (MB), wall and CPU seconds and JSON bytes of one `fair-pipeline audit` child process."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    entry = "fair_pipeline.commands" if (code_root / "fair_pipeline" / "commands").is_dir() else "fair_pipeline.cli"
    cmd = [sys.executable, "-m", entry, "audit", str(path), "--score", "score", "--label", "label",
           "--group", "grp", "--json"]
    if code_root == ROOT:
        cmd += ["--max-groups", str(groups), "--compare", compare]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=code_root)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err = child.stderr.read().decode()
        json_bytes = out.tell()
        pairs = None
        if child.returncode == 0 and code_root == ROOT:
            out.seek(0)
            pairs = json.load(out)["comparisons"]["pairs"]
    if child.returncode != 0:
        raise SystemExit(f"audit failed ({child.returncode}) with {groups} groups: {err.strip()[-500:]}")
    return {"rss_mb": usage.ru_maxrss / 1024, "wall_s": time.perf_counter() - start,
            "cpu_s": usage.ru_utime + usage.ru_stime, "json_mb": json_bytes / 2**20, "pairs": pairs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e5)
    parser.add_argument("--groups", default="200,1000,5000", help="comma-separated group counts")
    parser.add_argument("--all-up-to", type=int, default=200, help="also run --compare all up to this many groups")
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side (e.g. the landed code)")
    args = parser.parse_args(argv)
    counts = [int(v) for v in args.groups.split(",")]
    print(f"# fair-pipeline audit, {int(args.rows):,} rows; load average {os.getloadavg()[0]:.1f}")
    print(f"{'code':<10}{'compare':<11}{'groups':>7}{'pairs':>9}{'peak RSS MB':>13}{'JSON MB':>10}{'wall s':>9}"
          f"{'cpu s':>8}{'x groups':>10}{'x RSS':>7}{'x JSON':>8}")
    last: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_audit_groups_") as tmp:
        for groups in counts:
            path = Path(tmp) / f"groups_{groups}.csv"
            write_csv(path, int(args.rows), groups)
            runs = [("this", ROOT, "reference")] + ([("this", ROOT, "all")] if groups <= args.all_up_to else [])
            if args.baseline:
                runs.append(("baseline", args.baseline.resolve(), None))
            for name, root, compare in runs:
                r = run_child(root, path, groups, compare)
                key = (name, compare)
                growth = ""
                if key in last:  # growth since the previous group count of the same code and mode
                    g0, r0 = last[key]
                    growth = (f"{groups / g0:>10.1f}{(r['rss_mb']) / r0['rss_mb']:>7.2f}"
                              f"{r['json_mb'] / r0['json_mb']:>8.2f}")
                last[key] = (groups, r)
                pairs = "" if r["pairs"] is None else f"{r['pairs']:,}"
                print(f"{name:<10}{compare or '(own)':<11}{groups:>7}{pairs:>9}{r['rss_mb']:>13.0f}{r['json_mb']:>10.1f}"
                      f"{r['wall_s']:>9.1f}{r['cpu_s']:>8.1f}{growth}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
