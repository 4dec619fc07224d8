"""Module-scoped homes, restored after every test so the module's tests pass in any order.

A module-scoped home (simulated landing files, warehouse, MLflow store, built once because it takes tens of
seconds) is shared by the module's tests. A test that materializes another partition or configuration, records an
elicitation or registers a model changes it for every test after it, so a test could pass only because it ran
first. `restore_home_after_each_test` gives a module an autouse fixture that copies the home once, right after
its fixture built it, and puts every file back after each test: files a test created are removed, changed files
are rewritten in place (same inode, so a SQLite or DuckDB handle that a library keeps open between tests sees the
restored bytes, not a deleted file), deleted files come back.
"""
from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _entries(root: Path) -> dict[Path, Path]:
    """Every file, symlink and directory under root, by path relative to root."""
    return {path.relative_to(root): path for path in root.rglob("*")}


def _unchanged_file(source: Path, target: Path) -> bool:
    """target is a regular file with source's size and modification time (copy2 keeps both)."""
    if target.is_symlink() or not target.is_file():
        return False
    a, b = source.stat(), target.stat()
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def _remove(path: Path) -> None:
    """Whatever is at path (a file, a symlink, or a directory tree); nothing if nothing is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def restore(root: Path, pristine: Path) -> None:
    """Make root's files equal to pristine's (a copy taken with shutil.copytree(..., symlinks=True))."""
    current, original = _entries(root), _entries(pristine)
    # Remove what the test added, deepest first so a new directory is emptied before it goes.
    for relative in sorted(set(current) - set(original), key=lambda p: len(p.parts), reverse=True):
        _remove(current[relative])
    for relative, source in sorted(original.items(), key=lambda item: len(item[0].parts)):
        target = root / relative
        if source.is_symlink():
            if not (target.is_symlink() and target.readlink() == source.readlink()):
                _remove(target)
                target.symlink_to(source.readlink())
        elif source.is_dir():
            if target.is_symlink() or not target.is_dir():
                _remove(target)
                target.mkdir()
        elif not _unchanged_file(source, target):
            if target.is_symlink() or target.is_dir():
                _remove(target)
            shutil.copyfile(source, target)  # truncates and rewrites the same inode when target exists
            shutil.copystat(source, target)


def restore_home_after_each_test(fixture: str, root_of: Callable[[Any], Path] = Path, built_by: tuple[str, ...] = ()):
    """An autouse fixture for a module: after each test, the home of the module-scoped `fixture` (its value, or
    `root_of(value)`) is put back as it was once the fixture and the module-scoped fixtures `built_by` (which
    write into that home) were built. Assign it to a module-level name to activate it."""

    pristine_copies: dict[Path, Path] = {}

    def home_restored_after_the_test(tmp_path_factory, **module_fixtures):
        root = Path(root_of(module_fixtures[fixture]))
        if root not in pristine_copies:
            copy = tmp_path_factory.mktemp("pristine_home") / "home"
            shutil.copytree(root, copy, symlinks=True)
            pristine_copies[root] = copy
        yield
        restore(root, pristine_copies[root])

    # The home's fixtures are named in the signature, not fetched with request.getfixturevalue: pytest then sets
    # them up with the module's scope, before every function-scoped fixture, so a home fixture that sets
    # FAIR_PIPELINE_HOME does so before conftest's environment check takes its snapshot (fetched from inside this
    # fixture, it was set mid-test, and that check undid it for the rest of the module).
    names = ["tmp_path_factory", fixture, *built_by]
    home_restored_after_the_test.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names])
    return pytest.fixture(autouse=True)(home_restored_after_the_test)
