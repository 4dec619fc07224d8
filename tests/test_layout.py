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


MAX_MODULE_LINES = 450
MAX_ASSET_BODY_LINES = 40
# Modules still over the limit, each being split by the work that owns it (the ingestion loads, which the Spark
# ingestion work is reshaping). Nothing may join this list.
LONG_MODULES: set[str] = set()
# Asset bodies not yet split into compute / log / metadata / checks functions (the static benchmark fits; the
# ingestion loads, which the Spark ingestion work is reshaping). Nothing may join this list.
LONG_ASSETS: set[str] = set()
_ASSET_DECORATORS = {"asset", "multi_asset", "graph_asset", "asset_check", "multi_asset_check", "pipeline_asset"}


def _module_lines() -> dict[str, int]:
    return {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}


def asset_body_lines(source: str) -> dict[str, int]:
    """{function name: lines of its body, docstring excluded} of every function decorated as a Dagster asset."""
    import ast

    def decorator_name(node) -> str:
        func = node.func if isinstance(node, ast.Call) else node
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")

    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                decorator_name(d) in _ASSET_DECORATORS for d in node.decorator_list):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            out[node.name] = body[-1].end_lineno - body[0].lineno + 1 if body else 0
    return out


def test_no_module_is_longer_than_450_lines():
    long = {path: n for path, n in _module_lines().items() if n > MAX_MODULE_LINES}
    assert set(long) <= LONG_MODULES, {p: n for p, n in long.items() if p not in LONG_MODULES}


def test_every_asset_body_is_at_most_40_lines():
    long = {}
    for path in PACKAGE.rglob("*.py"):
        for name, lines in asset_body_lines(path.read_text()).items():
            if lines > MAX_ASSET_BODY_LINES:
                long[f"{path.relative_to(REPO)}:{name}"] = lines
    assert set(long) <= LONG_ASSETS, {k: n for k, n in long.items() if k not in LONG_ASSETS}


def test_the_asset_body_count_can_fail():
    body = "\n".join(f"    x{k} = {k}" for k in range(41))
    source = f'import dagster as dg\n\n@dg.asset(key="a")\ndef a():\n    """Doc."""\n{body}\n'
    assert asset_body_lines(source) == {"a": 41}


def _package_trees():
    import ast

    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(REPO), ast.parse(path.read_text(), str(path))


def test_no_import_tricks_and_no_pickles_in_the_package():
    """No finder on sys.meta_path, no module whose class is swapped, nothing (cloud)pickled: a model file holds data."""
    import ast

    found = []
    for path, tree in _package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "meta_path":
                found.append(f"{path}:{node.lineno} sys.meta_path")
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [f"{path}:{node.lineno} __class__ assignment" for target in targets
                          if isinstance(target, ast.Attribute) and target.attr == "__class__"]
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names]  # `from pyspark import cloudpickle` counts too
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                found += [f"{path}:{node.lineno} imports {name}" for name in names
                          if name.split(".")[0] in ("cloudpickle", "pickle", "dill", "joblib")]
    assert not found, found


def _unused_definitions(root: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "vulture", "fair_pipeline", "tests", "benchmarks", "--min-confidence",
                             "60", "--ignore-names", "*_"], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 3), result.stderr  # 3: findings (those in tests or benchmarks do not count)
    return [line for line in result.stdout.splitlines() if line.startswith("fair_pipeline")]


def test_no_definition_of_the_package_is_referenced_nowhere():
    """vulture over the package, its tests and benchmarks: every package definition is used somewhere; what only a
    framework or a caller uses by name is listed in tests/vulture_allowlist.py, fitted attributes (`name_`) aside."""
    pytest.importorskip("vulture")  # the dev extra installs it
    unused = _unused_definitions(REPO)
    assert not unused, "\n".join(unused)


def test_a_function_referenced_nowhere_is_found(tmp_path):
    pytest.importorskip("vulture")
    for folder in ("fair_pipeline", "tests", "benchmarks"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "fair_pipeline" / "position_bias" / "store.py"
    store.write_text(store.read_text() + "\n\ndef load_every_curve(con):\n    return con\n")
    assert _unused_definitions(tmp_path) == [
        "fair_pipeline/position_bias/store.py:" + str(len(store.read_text().splitlines()) - 1)
        + ": unused function 'load_every_curve' (60% confidence)"]


def test_test_modules_import_helpers_from_helper_modules_not_from_conftest():
    """conftest.py holds fixtures and hooks that pytest loads itself; shared helpers live in modules of their own."""
    import ast

    importing = []
    for path in (REPO / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "tests.conftest":
                importing.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not importing, importing
