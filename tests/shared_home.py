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

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _entries(root: Path) -> dict[Path, Path]:
    """Every file, symlink and directory under root, by path relative to root."""
    return {path.relative_to(root): path for path in root.rglob("*")}


def _same_file(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and a.readlink() == b.readlink()
    sa, sb = a.stat(), b.stat()
    return sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns


def restore(root: Path, pristine: Path) -> None:
    """Make root's files equal to pristine's (a copy taken with shutil.copytree(..., symlinks=True))."""
    current, original = _entries(root), _entries(pristine)
    # Remove what the test added, deepest first so a new directory is emptied before it goes.
    for relative in sorted(set(current) - set(original), key=lambda p: len(p.parts), reverse=True):
        path = current[relative]
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    for relative, source in sorted(original.items(), key=lambda item: len(item[0].parts)):
        target = root / relative
        if source.is_symlink():
            if not target.is_symlink() or target.readlink() != source.readlink():
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
                target.symlink_to(source.readlink())
        elif source.is_dir():
            if target.is_symlink() or target.is_file():
                target.unlink()
            target.mkdir(exist_ok=True)
        elif not (target.exists() and not target.is_symlink() and _same_file(source, target)):
            if target.is_symlink() or target.is_dir():
                shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
            shutil.copyfile(source, target)  # truncates and rewrites the same inode when target exists
            shutil.copystat(source, target)


def restore_home_after_each_test(fixture: str, root_of: Callable[[Any], Path] = Path, built_by: tuple[str, ...] = ()):
    """An autouse fixture for a module: after each test, the home of the module-scoped `fixture` (its value, or
    `root_of(value)`) is put back as it was once the fixture and the module-scoped fixtures `built_by` (which
    write into that home) were built. Assign it to a module-level name to activate it."""

    pristine_copies: dict[Path, Path] = {}

    @pytest.fixture(autouse=True)
    def home_restored_after_the_test(request, tmp_path_factory):
        root = Path(root_of(request.getfixturevalue(fixture)))
        for builder in built_by:
            request.getfixturevalue(builder)
        if root not in pristine_copies:
            copy = tmp_path_factory.mktemp("pristine_home") / "home"
            shutil.copytree(root, copy, symlinks=True)
            pristine_copies[root] = copy
        yield
        restore(root, pristine_copies[root])

    return home_restored_after_the_test
