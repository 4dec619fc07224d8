"""Which files under a folder any code in this process or another opened or read (Linux inotify, through ctypes).

inotify reports the kernel's IN_OPEN / IN_ACCESS events, so a read by any library (Python's open, pyarrow's or
DuckDB's C++ readers, a subprocess) is seen, not only the ones a mock would intercept. Listing a folder and stat()
of a file raise no event on the file.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
from collections.abc import Iterator
from pathlib import Path

IN_ACCESS, IN_OPEN, IN_ISDIR, IN_NONBLOCK = 0x1, 0x20, 0x40000000, 0o4000
_EVENT = struct.Struct("iIII")


class FileReads:
    """The files opened or read under `root` while the `watch` context was open (`files`: paths)."""

    def __init__(self) -> None:
        self.files: set[Path] = set()


@contextlib.contextmanager
def watch(root: Path) -> Iterator[FileReads]:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = libc.inotify_init1(IN_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    folders = {}
    try:
        for folder in [Path(root), *(p for p in Path(root).rglob("*") if p.is_dir())]:
            wd = libc.inotify_add_watch(fd, os.fsencode(folder), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
            folders[wd] = folder
        reads = FileReads()
        yield reads
        while True:
            try:
                buffer = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            offset = 0
            while offset < len(buffer):
                wd, mask, _, length = _EVENT.unpack_from(buffer, offset)
                name = buffer[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if name and not mask & IN_ISDIR:
                    reads.files.add(folders[wd] / os.fsdecode(name))
    finally:
        os.close(fd)
