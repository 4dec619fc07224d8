"""A full disk: the CLI ends with one line saying so, and once space is freed the next run recovers.

The slow test mounts a small tmpfs as the home (root only; skipped with the reason otherwise), fills it with a
ballast file before the run, and deletes the ballast before the recovery run."""
from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest

from benchmarks import kill_harness
from fair_pipeline.platform import disk_space

DISK_MB = 64
# A clean run of kill_harness.Sizes() writes about 18 MB: under 1 MB by the end of ingestion, about 4 MB until
# training, the rest in the later stages. 3 MB free fills while ingesting, 10 MB in the later stages.
RUN_TIMEOUT_S = 1200
# The lines Dagster prints when its event log (SQLite on the same full disk) refuses a record.
DAGSTER_EVENT_LOG_ERROR = ("Exception while writing logger call to event log", "[SQL: ", "[parameters: ",
                           "(Background on this error at:")


def test_enospc_anywhere_in_the_chain_or_a_nearly_full_disk_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 10 * 2**30)
    assert disk_space.disk_full_line(tmp_path, ValueError("column 'score' is missing")) is None
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("Error occurred while executing op") from inner
    except RuntimeError as outer:
        line = disk_space.disk_full_line(tmp_path / "not-yet", outer)
    assert line.startswith(f"the disk holding {tmp_path / 'not-yet'} is full (10240.0 MB free)")
    assert disk_space.disk_full_line(tmp_path, "IO Error: database or disk is full")
    # SQLite on a full tmpfs says only "disk I/O error": the free space tells.
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 2**20)
    assert "(1.0 MB free)" in disk_space.disk_full_line(tmp_path, "sqlite3.OperationalError: disk I/O error")


def test_only_io_failures_are_blamed_on_a_nearly_full_disk(tmp_path, monkeypatch):
    """A bug that happens while the disk is nearly full (a SyntaxError, a bad column) is reported as itself; an
    I/O failure, or the disk's own words, are reported as a full disk."""
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 2**20)
    for error in (SyntaxError("invalid syntax"), ValueError("column 'score' is missing"),
                  "marts__eo_transforms: SyntaxError: invalid syntax", "check raw/items failed: 3 NULL item ids"):
        assert disk_space.disk_full_line(tmp_path, error) is None, error
    try:
        try:
            raise SyntaxError("invalid syntax")
        except SyntaxError as inner:
            raise RuntimeError("Error occurred while executing op") from inner
    except RuntimeError as outer:
        assert disk_space.disk_full_line(tmp_path, outer) is None
    for error in (OSError(errno.EIO, "Input/output error"), "raw__items: OSError: [Errno 5] Input/output error",
                  "IO Error: could not write to file", OSError(errno.ENOSPC, "No space left on device")):
        assert "(1.0 MB free)" in disk_space.disk_full_line(tmp_path, error), error
    # with plenty of space only the disk's own words count
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 10 * 2**30)
    assert disk_space.disk_full_line(tmp_path, OSError(errno.EIO, "Input/output error")) is None
    assert disk_space.disk_full_line(tmp_path, "duckdb.IOException: IO Error: No space left on device")


@pytest.fixture
def small_disk(tmp_path: Path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        # This process may still hold mlflow.db open (MLflow keeps the SQLite engine of a store it has opened):
        # then detach the mount now; the kernel frees it when the last file closes.
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    """The landing files both cases copy into their home (read only)."""
    return kill_harness.simulate(tmp_path_factory.mktemp("landing_home"), kill_harness.Sizes())


def _fill(ballast: Path, leave_bytes: int) -> None:
    with ballast.open("wb") as out:
        out.write(b"\0" * (disk_space.free_bytes(ballast.parent) - leave_bytes))


def _run(home: Path) -> tuple[int, list[str]]:
    """`run --no-simulate` with stdout and stderr in one stream, as a terminal shows them."""
    result = subprocess.run([*kill_harness.CLI, "run", "--no-simulate"], cwd=kill_harness.REPO,
                            env=kill_harness.environment(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=RUN_TIMEOUT_S)
    return result.returncode, result.stdout.strip().splitlines()


@pytest.mark.slow
@pytest.mark.timeout(3 * RUN_TIMEOUT_S)
@pytest.mark.parametrize("free_mb", [3, 10], ids=["full_while_ingesting", "full_later_in_the_run"])
def test_full_disk_ends_with_one_clear_line_and_the_next_run_recovers(small_disk, landing, free_mb):
    home = kill_harness.fresh_home(small_disk / "home", landing)
    ballast = small_disk / "ballast"
    _fill(ballast, free_mb * 2**20)

    code, lines = _run(home)
    assert code == 1, "\n".join(lines[-40:])
    assert lines[-1].startswith(f"[fair-pipeline] failed: ") and f"the disk holding {home} is full" in lines[-1], (
        "\n".join(lines[-40:]))
    # One clear line, not a traceback: from the first sign of the failure to the end, each failed step's line and
    # its cause (steps running side by side can both hit the full disk), the run's summary and the last line.
    # Dagster's own note that it could not log to the full disk (its SQL error) is not ours to shorten.
    first = next(k for k, line in enumerate(lines) if "FAILED" in line or line.startswith("[fair-pipeline] failed"))
    tail = [line for line in lines[first:] if not line.startswith(DAGSTER_EVENT_LOG_ERROR)]
    failed_steps = sum("FAILED" in line for line in tail)
    assert not any("Traceback" in line for line in lines) and len(tail) <= 8 + 2 * (failed_steps - 1), (
        "\n".join(lines[first:][:60]))

    ballast.unlink()
    code, lines = _run(home)
    assert code == 0, "\n".join(lines[-40:])
    outcome = kill_harness.Outcome("disk_full")
    kill_harness.check_recovered(home, None, outcome)
    assert outcome.recovered, outcome.problems
