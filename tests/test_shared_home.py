"""The restore behind module-scoped homes: after any change, the home equals its pristine copy, byte for byte."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.shared_home import restore


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry: file bytes, symlink target, or 'dir'."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = f"-> {path.readlink()}" if path.is_symlink() else ("dir" if path.is_dir() else path.read_bytes())
    return out


def _home(root: Path) -> Path:
    (root / "mlartifacts" / "1" / "run").mkdir(parents=True)
    (root / "mlartifacts" / "1" / "run" / "model.pkl").write_bytes(b"model")
    (root / "reports" / "2026-01-03").mkdir(parents=True)
    (root / "reports" / "2026-01-03" / "report.html").write_text("<html>3</html>")
    (root / "reports" / "latest").symlink_to("2026-01-03")
    with sqlite3.connect(root / "mlflow.db") as con:
        con.execute("CREATE TABLE runs (id INTEGER)")
        con.execute("INSERT INTO runs VALUES (1)")
    con.close()
    return root


def test_every_kind_of_change_is_undone(tmp_path):
    home = _home(tmp_path / "home")
    pristine = tmp_path / "pristine"
    shutil.copytree(home, pristine, symlinks=True)
    expected = _tree(home)

    (home / "mlartifacts" / "2" / "new").mkdir(parents=True)  # a new directory tree
    (home / "mlartifacts" / "2" / "new" / "f").write_text("x")
    (home / "mlartifacts" / "1" / "run" / "model.pkl").unlink()  # a deleted file
    (home / "reports" / "2026-01-03" / "report.html").write_text("<html>changed</html>")  # a changed file
    (home / "reports" / "2026-01-04").mkdir()
    (home / "reports" / "latest").unlink()  # a moved symlink
    (home / "reports" / "latest").symlink_to("2026-01-04")
    (home / "warehouse.duckdb.wal").write_bytes(b"wal")  # a new file at the top
    assert _tree(home) != expected

    restore(home, pristine)
    assert _tree(home) == expected


def test_a_connection_kept_open_sees_the_restored_database(tmp_path):
    """Changed files are rewritten in place, so a handle a library keeps open between tests reads the restored
    bytes (a replaced file would leave it reading the test's version through the deleted inode)."""
    home = _home(tmp_path / "home")
    pristine = tmp_path / "pristine"
    shutil.copytree(home, pristine, symlinks=True)
    inode = (home / "mlflow.db").stat().st_ino
    kept_open = sqlite3.connect(home / "mlflow.db")
    kept_open.execute("INSERT INTO runs VALUES (2)")
    kept_open.commit()
    assert kept_open.execute("SELECT count(*) FROM runs").fetchone() == (2,)

    restore(home, pristine)
    assert (home / "mlflow.db").stat().st_ino == inode
    assert kept_open.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    kept_open.close()
