"""Locations of the Spark engine as URIs, and the file systems that list landing folders.

A location is a URI: `file:///...`, `hdfs://...`, or any scheme the cluster's Hadoop client knows; a plain path
is taken as `file://` on its absolute form. The warehouse itself is read and changed through Spark only
(`spark_tables`; the commit log's old files are deleted by the session's Hadoop client, `log_retention`); these
file systems list the landing folders a day's files are discovered in
(`ingestion.landing_uris`), one interface for two:
- `HadoopFiles`: the session's own Hadoop FileSystem API (in the driver JVM, with the session's Hadoop settings),
  for every scheme. Classic sessions only: a Spark Connect client has no JVM.
- `LocalFiles`: this machine's file system, for plain paths and `file://` locations (a Spark Connect client's).
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from urllib.parse import urlsplit


def has_scheme(location: str) -> bool:
    """A URI with a scheme of two or more letters (a Windows drive letter such as C: is a path)."""
    scheme, separator, _ = location.partition(":")
    return bool(separator) and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()


def location_uri(location: str | Path) -> str:
    """`location` as a URI without a trailing slash: a plain path becomes `file://` + its absolute path. The path
    stays unescaped: Hadoop takes a URI's path as written (`Path.as_uri`'s %20 would name another file)."""
    text = str(location)
    if has_scheme(text):
        return text.rstrip("/") if not text.endswith(":///") else text
    return "file://" + str(Path(text).expanduser().resolve())


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])


def listing_uri(uri: str) -> str:
    """`uri` as Spark should be given a directory whose own name starts with `_` (the commit log's): as `<uri>/.`,
    which Hadoop's Path normalizes to `<uri>/`, whose name is empty. Given `<uri>`, Spark logs `WARN DataSource: All
    paths were ignored` (it filters names starting with `_`, then reads the directory all the same); a glob of its
    children instead makes it log that it found no metadata directory at the glob."""
    return join(uri, ".")


def parent(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0]


def name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[1]


def is_local(uri: str) -> bool:
    return not has_scheme(uri) or urlsplit(uri).scheme == "file"


def local_path(uri: str | Path) -> Path:
    """The local path of a `file://` URI (or a plain path); another scheme is refused, naming it."""
    text = str(uri)
    if not has_scheme(text):
        return Path(text)
    parts = urlsplit(text)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise ValueError(f"{text} is not on the local file system; only Spark's Hadoop client reads it "
                         "(a classic Spark session, not a Spark Connect client)")
    return Path(text[len("file://"):] if text.startswith("file://") else text[len("file:"):])


class LocalFiles:
    """The file system of this process's machine, for plain paths and `file://` URIs (see the module docstring)."""

    def exists(self, uri: str) -> bool:
        return local_path(uri).exists()

    def list_dirs(self, uri: str) -> list[str]:
        """Names of the subdirectories, sorted; none when the directory does not exist."""
        path = local_path(uri)
        return sorted(p.name for p in path.iterdir() if p.is_dir()) if path.is_dir() else []

    def list_entries(self, uri: str) -> list[tuple[str, str, int]]:
        """(name, kind, bytes) of each entry, sorted by name; kind is "dir", "file" (a regular file, links followed)
        or "other" (a FIFO, a socket, a broken link). An unreadable directory raises OSError."""
        entries = []
        for entry in os.scandir(local_path(uri)):
            try:
                status = os.stat(entry.path)  # follows links; never opens the file (a FIFO's open would block)
            except OSError:
                entries.append((entry.name, "other", 0))
                continue
            kind = "dir" if stat.S_ISDIR(status.st_mode) else "file" if stat.S_ISREG(status.st_mode) else "other"
            entries.append((entry.name, kind, status.st_size))
        return sorted(entries)

    def status(self, uri: str) -> tuple[int, int, str | None]:
        """(bytes, modification time in ms, checksum or None) of a file, from its metadata (never opened)."""
        status = os.stat(local_path(uri))
        return status.st_size, status.st_mtime_ns // 1_000_000, None

    def copy_to_local(self, uri: str, target: Path) -> None:
        shutil.copyfile(local_path(uri), target)


class HadoopFiles:
    """The Hadoop FileSystem of a classic SparkSession (its JVM, its Hadoop configuration: credentials, HDFS name
    nodes, object-store settings given as spark.hadoop.* reach it). Each call is one round trip to the driver JVM;
    a day's discovery makes one per folder, never one per row."""

    def __init__(self, spark):
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _path(self, uri: str):
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def _fs(self, path):
        return path.getFileSystem(self._conf)

    def exists(self, uri: str) -> bool:
        path = self._path(uri)
        return bool(self._fs(path).exists(path))

    def _list(self, uri: str, directories: bool) -> list[str]:
        path = self._path(uri)
        fs = self._fs(path)
        if not fs.exists(path):
            return []
        return sorted(status.getPath().getName() for status in fs.listStatus(path)
                      if bool(status.isDirectory()) == directories)

    def list_dirs(self, uri: str) -> list[str]:
        return self._list(uri, directories=True)

    def list_entries(self, uri: str) -> list[tuple[str, str, int]]:
        """As `LocalFiles.list_entries`. Hadoop's local file system reports a FIFO as a file of 0 bytes, which
        no Parquet file is (the landing's discovery refuses it by its size). A failed listing raises OSError."""
        path = self._path(uri)
        try:
            statuses = self._fs(path).listStatus(path)
        except Exception as error:  # noqa: BLE001 - Py4J wraps the JVM's IOException
            raise OSError(f"cannot list {uri}: {_java_message(error)}") from error
        return sorted((status.getPath().getName(), "dir" if status.isDirectory() else "file" if status.isFile()
                       else "other", int(status.getLen())) for status in statuses)

    def status(self, uri: str) -> tuple[int, int, str | None]:
        """As `LocalFiles.status`, from the FileSystem's FileStatus; the checksum is the file system's own
        (`getFileChecksum`: HDFS's MD5 of its block CRCs; None where it keeps none, as on a local disk)."""
        path = self._path(uri)
        fs = self._fs(path)
        try:
            status, checksum = fs.getFileStatus(path), fs.getFileChecksum(path)
        except Exception as error:  # noqa: BLE001 - Py4J wraps the JVM's IOException
            raise OSError(f"cannot read the status of {uri}: {_java_message(error)}") from error
        described = None if checksum is None else f"{checksum.getAlgorithmName()}:{bytes(checksum.getBytes()).hex()}"
        return int(status.getLen()), int(status.getModificationTime()), described

    def delete(self, uri: str) -> None:
        """Remove a file or a directory with everything in it (the commit log's housekeeping: `log_retention`); a
        path already gone is not an error."""
        path = self._path(uri)
        self._fs(path).delete(path, True)

    def copy_to_local(self, uri: str, target: Path) -> None:
        """Copy a file to this machine (no checksum file beside it)."""
        path = self._path(uri)
        self._fs(path).copyToLocalFile(False, path, self._path(location_uri(target)), True)


def _java_message(error: Exception) -> str:
    java = getattr(error, "java_exception", None)
    return str(java.toString()) if java is not None else str(error)


def files_for(spark, connect: bool):
    """The file system landing folders are listed with: the session's Hadoop client on a classic session; this
    machine's on a Spark Connect client (no JVM here)."""
    return LocalFiles() if connect else HadoopFiles(spark)
