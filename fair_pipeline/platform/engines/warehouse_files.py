"""Where the Spark engine's files live (a URI) and the file system that changes them.

A location is a URI: `file:///...`, `hdfs://...`, or any scheme the cluster's Hadoop client knows; a plain path
is taken as `file://` on its absolute form. Two file systems, one interface:
- `HadoopFiles`: the session's own Hadoop FileSystem API (in the driver JVM, with the session's Hadoop settings),
  so renames and listings happen where the executors write, for every scheme. Classic sessions only: a Spark
  Connect client has no JVM.
- `LocalFiles`: Python's os/shutil on a `file://` location. What a Spark Connect client uses (its server shares the
  client's file system, or the location is refused), what reads a warehouse without starting a JVM
  (`fair-pipeline promote`), and what the pure tests of `partition_dirs` drive.
Every write of a small file (a journal, a schema, the view list) is a temporary file renamed over the target.
"""
from __future__ import annotations

import os
import shutil
import stat
import uuid
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

    def list_files(self, uri: str) -> list[str]:
        path = local_path(uri)
        return sorted(p.name for p in path.iterdir() if p.is_file()) if path.is_dir() else []

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

    def mkdirs(self, uri: str) -> None:
        local_path(uri).mkdir(parents=True, exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        """Move `source` to the absent `target` (whose parent exists); raises OSError otherwise."""
        if local_path(target).exists():
            raise FileExistsError(f"cannot move {source} to {target}: it exists")
        os.rename(local_path(source), local_path(target))

    def delete(self, uri: str) -> None:
        """Remove a file or a directory tree; nothing when it is absent."""
        path = local_path(uri)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def read_text(self, uri: str) -> str | None:
        path = local_path(uri)
        return path.read_text() if path.is_file() else None

    def write_text(self, uri: str, text: str) -> None:
        path = local_path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_text(text)
        os.replace(temporary, path)


class HadoopFiles:
    """The Hadoop FileSystem of a classic SparkSession (its JVM, its Hadoop configuration: credentials, HDFS name
    nodes, object-store settings given as spark.hadoop.* reach it). Each call is one round trip to the driver JVM;
    the engine makes a handful per write, never one per row or per data file."""

    def __init__(self, spark):
        self._jvm = spark._jvm
        self._gateway = spark.sparkContext._gateway
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

    def list_files(self, uri: str) -> list[str]:
        return self._list(uri, directories=False)

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

    def copy_to_local(self, uri: str, target: Path) -> None:
        """Copy a file to this machine (no checksum file beside it)."""
        path = self._path(uri)
        self._fs(path).copyToLocalFile(False, path, self._path(location_uri(target)), True)

    def mkdirs(self, uri: str) -> None:
        path = self._path(uri)
        if not self._fs(path).mkdirs(path):
            raise OSError(f"cannot create the directory {uri}")

    def rename(self, source: str, target: str) -> None:
        """Move `source` to the absent `target`. Hadoop's rename moves a directory *into* an existing target
        directory, so an existing target is refused rather than nested."""
        source_path, target_path = self._path(source), self._path(target)
        fs = self._fs(source_path)
        if fs.exists(target_path):
            raise FileExistsError(f"cannot move {source} to {target}: it exists")
        if not fs.rename(source_path, target_path):
            raise OSError(f"the file system refused to move {source} to {target}")

    def delete(self, uri: str) -> None:
        path = self._path(uri)
        fs = self._fs(path)
        if fs.exists(path) and not fs.delete(path, True):
            raise OSError(f"cannot delete {uri}")

    def read_text(self, uri: str) -> str | None:
        path = self._path(uri)
        fs = self._fs(path)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode("utf-8")
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        """Write a temporary file beside `uri`, then rename it over `uri` (FileContext's rename with OVERWRITE:
        FileSystem.rename refuses an existing target)."""
        target = self._path(uri)
        temporary = self._path(f"{uri}.{uuid.uuid4().hex}.tmp")
        fs = self._fs(target)
        fs.mkdirs(target.getParent())
        stream = fs.create(temporary, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        hadoop = self._jvm.org.apache.hadoop.fs
        options = self._gateway.new_array(hadoop.Options.Rename, 1)
        options[0] = hadoop.Options.Rename.OVERWRITE
        try:
            hadoop.FileContext.getFileContext(target.toUri(), self._conf).rename(temporary, target, options)
        except BaseException:
            fs.delete(temporary, False)
            raise


def _java_message(error: Exception) -> str:
    java = getattr(error, "java_exception", None)
    return str(java.toString()) if java is not None else str(error)


def files_for(spark, uri: str, connect: bool):
    """The file system the engine changes `uri` with: the session's Hadoop client on a classic session; on a Spark
    Connect client (no JVM here) this machine's, for a `file://` location only (see the module docstring)."""
    if not connect:
        return HadoopFiles(spark)
    if not is_local(uri):
        raise ValueError(f"the Spark warehouse {uri}: over Spark Connect the warehouse must be a file:// location "
                         "that this client and the server share (the client has no Hadoop client of its own); "
                         "use a classic session (local[N], spark://, yarn, k8s://) for other schemes")
    return LocalFiles()
