"""Make a directory untouchable by this process's own file operations: any audited file operation (open, listing,
rename, removal, creation, ...) or `os.stat`/`os.lstat` (which Python does not audit: `Path.exists`, `is_dir`)
naming a path inside it ends the process at once with `FORBIDDEN_EXIT` and the event on stderr, so no `except`
can hide it. What a Spark Connect client does through its server is not this process's file operation and passes.

    forbid(Path("/data/warehouse"))   # then run the code under test in this process
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

FORBIDDEN_EXIT = 97


def _inside(value, root: str) -> bool:
    if isinstance(value, int) or not isinstance(value, (str, bytes, os.PathLike)):
        return False
    try:
        text = os.fsdecode(value)
    except (TypeError, ValueError):
        return False
    if text.startswith("file:"):  # a file:// URI names the same directory
        text = "/" + text[len("file:"):].lstrip("/")
    path = os.path.abspath(text)
    return path == root or path.startswith(root + os.sep)


def _stop(event: str, args) -> None:
    os.write(2, f"forbidden file operation on the warehouse: {event} {args!r}\n".encode(errors="replace"))
    os._exit(FORBIDDEN_EXIT)


def forbid(directory: Path) -> None:
    root = os.path.abspath(directory)
    stat, lstat = os.stat, os.lstat

    def hook(event: str, args) -> None:
        if any(_inside(arg, root) for arg in (args if isinstance(args, tuple) else (args,))):
            _stop(event, args)

    def guarded(original):
        def check(path, *args, **kwargs):
            if _inside(path, root):
                _stop(original.__name__, (path,))
            return original(path, *args, **kwargs)
        return check

    os.stat, os.lstat = guarded(stat), guarded(lstat)
    sys.addaudithook(hook)
