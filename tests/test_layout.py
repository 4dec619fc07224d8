"""The package layout: import contracts kept (lint-imports), few root modules, a tour in every stage package."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "fair_pipeline"
STAGES = ["platform", "ingestion", "datasets", "position_bias", "eo", "training", "postprocessing", "audit", "selection", "reporting",
          "reproductions"]
CONTRACTS = 4


def _lint_imports(cwd: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe)] if exe.exists() else [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]
    env = dict(os.environ, PYTHONPATH=str(extra_path or cwd))
    return subprocess.run([*command, "--config", str(cwd / "pyproject.toml"), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_import_contract_is_kept():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {CONTRACTS} kept, 0 broken." in result.stdout


def test_a_pure_math_module_importing_duckdb_breaks_a_contract(tmp_path):
    # The contracts must be able to fail: a copy of the package whose audit sweep imports duckdb is refused.
    shutil.copytree(PACKAGE, tmp_path / "fair_pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    sweep = tmp_path / "fair_pipeline" / "audit" / "stats" / "sweep.py"
    sweep.write_text("import duckdb  # noqa\n" + sweep.read_text())
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "Pure math imports no orchestration" in result.stdout and "BROKEN" in result.stdout
    assert "fair_pipeline.audit.stats.sweep -> duckdb" in result.stdout


def test_at_most_eight_root_modules():
    roots = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(roots) <= 8, roots


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_package_opens_with_a_tour_and_exports_its_public_names(stage):
    module = importlib.import_module(f"fair_pipeline.{stage}")
    doc = module.__doc__ or ""
    assert len(doc.split()) >= 25, f"fair_pipeline.{stage} needs a one-paragraph tour"
    assert f"tests/{stage}/" in doc, "the tour says where the tests live"
    assert (REPO / "tests" / stage).is_dir()
    for name in getattr(module, "__all__", []):
        assert hasattr(module, name), f"fair_pipeline.{stage}.__all__ names {name!r}, which it does not define"


def test_documented_public_api_imports():
    from fair_pipeline.audit import compare_groups, truncated_auc, xauc  # noqa: F401
    from fair_pipeline.eo import WeightedCDFTransformer  # noqa: F401
    from fair_pipeline.position_bias import estimate_position_bias  # noqa: F401
    from fair_pipeline.selection import elicit_fair_quadratic_metric  # noqa: F401
    from fair_pipeline.training import MIPenalizedLogisticRegression  # noqa: F401
