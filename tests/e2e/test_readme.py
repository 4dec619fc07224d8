"""Every command of the README runs verbatim, in the README's order, on a fresh `data/`.

How "verbatim" is kept: the fenced `bash` blocks are read from README.md, `.venv/bin/` is the interpreter running
the tests (the suite runs inside the README's own venv in CI), and the working directory is a fresh temp dir
(with `data/external` linked to the shipped datasets). The two set-up commands' `python3 -m venv .venv && pip
install ...` prefixes are what `.ci/run` executes on a fresh clone; here their remainder runs: `fair-pipeline run`
first (the default week), then the common tasks in README order, and not `pytest` (this is the suite). The audit of
a shipped CSV file reads nothing the other commands write and writes nothing: it runs beside them, from the start.
`fair-pipeline ui` is tested by tests/app/test_ui_stop.py and the browser tests.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install [^&]+&& ")
# A command that reads only the shipped datasets and writes nothing: its output does not depend on when it runs.
BESIDE_THE_OTHERS = re.compile(r"/fair-pipeline audit data/external/")


def readme_commands(path: Path = REPO / "README.md") -> list[str]:
    """The lines of every fenced bash block, in order (blank lines and comments dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", path.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def _runnable(command: str) -> str | None:
    """The command as it runs here: None for the test-suite command, the set-up prefix dropped, `.venv/bin/`
    pointing at this interpreter's bin directory."""
    rest = INSTALL.sub("", command)
    if rest.endswith("-m pytest"):
        return None
    return rest.replace(".venv/bin/", f"{BIN}/")


def _run(command: str, cwd: Path, timeout: int = 1800) -> subprocess.CompletedProcess:
    unset = ("FAIR_PIPELINE_HOME", "DAGSTER_HOME", "MLFLOW_TRACKING_URI", "FAIR_PIPELINE_START_DATE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command!r} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _versions(data: Path, name: str) -> list[str]:
    from fair_pipeline.platform.tracking import store_client

    client = store_client(f"sqlite:///{data / 'mlflow.db'}")
    return sorted(v.version for v in client.search_model_versions(f"name = '{name}'"))


def test_readme_lists_the_setup_commands_first():
    commands = readme_commands()
    assert commands[0] == "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/fair-pipeline run"
    assert commands[1] == "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest"
    assert all(shlex.split(c) for c in commands)  # every line parses as a shell command


def test_the_pipeline_diagram_is_the_asset_graph_of_the_definitions():
    """The README's Mermaid picture is generated from the Definitions (one node per asset group, an edge where a
    group reads another), so adding, regrouping or rewiring an asset fails here until the picture is updated."""
    from fair_pipeline.definitions import defs
    from fair_pipeline.platform.lineage_diagram import group_edges, mermaid

    groups, edges = group_edges(defs)
    assert {"ingestion", "position_bias", "eo_transform", "training", "audit", "selection", "reporting"} <= set(groups)
    assert ("audit", "selection") in edges and ("selection", "reporting") in edges
    readme = re.search(r"```mermaid\n.*?```", (REPO / "README.md").read_text(), re.S)
    assert readme and readme[0] == mermaid(defs), f"replace the README's Mermaid block with:\n{mermaid(defs)}"


def test_every_relative_link_and_picture_of_the_readme_exists():
    """Docs pages and screenshots (docs/images/*.png: the browser tests' first screen of the report and Dagster's
    global lineage, copied from test-artifacts/) that the README links to are in the repository."""
    targets = re.findall(r"\]\(([^)\s#]+)[^)]*\)", (REPO / "README.md").read_text())
    relative = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert any(t.endswith(".png") for t in relative) and any(t.startswith("docs/") for t in relative)
    assert [t for t in relative if not (REPO / t).exists()] == []
    for picture in (t for t in relative if t.endswith(".png")):
        assert (REPO / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a dozen commands, six of them Dagster runs
def test_every_readme_command_runs(tmp_path: Path):
    """The main job (command 1) on a fresh `data/`, then every common task exactly in README order, as a new user
    following the README does (command 2, the test suite, is this suite)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "external").symlink_to(REPO / "data" / "external", target_is_directory=True)
    commands = readme_commands()
    runnable = [c for c in map(_runnable, [commands[0], *commands[2:]]) if c is not None]
    assert runnable[0] == runnable[-2] == runnable[-1] == f"{BIN}/fair-pipeline run"  # first, and twice last
    assert len(runnable) == len(commands) - 1
    outputs, champions = [], []
    with ThreadPoolExecutor(max_workers=1) as beside:
        started = {k: beside.submit(_run, c, tmp_path) for k, c in enumerate(runnable) if BESIDE_THE_OTHERS.search(c)}
        assert len(started) == 1
        for k, command in enumerate(runnable):
            result = started[k].result() if k in started else _run(command, tmp_path)
            assert "SupersessionWarning" not in result.stderr and "deprecated" not in result.stderr.lower(), command
            outputs.append(result.stdout)
            champions.append(_champion(data))
    newest = (data / "reports" / "latest").resolve().name
    # The backfill gave every day with an earlier day its own report; it moved no alias and not reports/latest.
    assert {"2026-01-02", "2026-01-03"} <= {p.name for p in (data / "reports").iterdir()}
    assert newest > "2026-01-03"
    backfill = next(k for k, c in enumerate(runnable) if " backfill " in c)
    assert champions[backfill] == champions[0]
    findings = json.loads((data / "reports" / "2026-01-03" / "findings.json").read_text())
    assert not findings["missing"], findings["missing"]
    assert any(f["section"].startswith("Audit trend") for f in findings["findings"])
    # The rollback moved @champion to 2026-01-02's model; `promote` alone moved it back to the newest day's.
    rollback, forward = [k for k, c in enumerate(runnable) if " promote" in c]
    assert "fair-ranker@champion -> v" in outputs[rollback] and "partition 2026-01-02" in outputs[rollback]
    assert champions[rollback] != champions[0]
    assert f"partition {newest}" in outputs[forward] and champions[forward] == champions[0]
    # The main job again: it ingested the days re-loaded with dg launch (their SQL models); they and the catalogue
    # delivered with the backfilled days are outside the newest day's window, so it did not re-run that day (the
    # catalogues, materialized by every ingestion, changed nothing that day reads); once more, it found nothing new,
    # launched no run and said so, and nothing moved. No command fitted a benchmark model (they run only when asked).
    assert "logs 2026-01-01..2026-01-02: run " in outputs[-2]
    assert f"partition {newest}: run " not in outputs[-2] and "deployed:" in outputs[-2]
    assert "[fair-pipeline] nothing new:" in outputs[-1], outputs[-1][-2000:]
    assert champions[-1] == champions[-2]
    assert {d: _versions(data, f"fair-benchmark-{d}") for d in ("adult", "compas")} == {"adult": [], "compas": []}


def _champion(data: Path) -> str | None:
    from mlflow.exceptions import MlflowException

    from fair_pipeline.platform.tracking import store_client

    client = store_client(f"sqlite:///{data / 'mlflow.db'}")
    try:
        return client.get_model_version_by_alias("fair-ranker", "champion").version
    except MlflowException:
        return None
