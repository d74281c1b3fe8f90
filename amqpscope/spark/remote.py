"""Capture files and logs behind URIs, for the `amqp` data source's Python workers.

A Python data source plans and reads in Python worker processes that have no JVM at hand, so
Hadoop's `FileSystem` (what `amqpscope spark` lists URIs with) cannot be asked there. These
workers read with Python's own clients instead:

- `http://` and `https://`: the standard library's `urllib` (named files only: HTTP lists no
  folders). Hadoop has an `http` filesystem too, in Spark's jars, but it cannot list either, so
  Spark's `binaryFile` source (which lists every path it reads) fails on it: `amqpscope spark`
  reads these URIs with this module as well.
- anything pyarrow's filesystems take (`s3://`, `s3a://` read as `s3://`, `gs://`, `abfs://`,
  `hdfs://` where libhdfs and a JVM are installed, as on a Hadoop node): listed, globbed and
  read with `pyarrow.fs`, credentials as pyarrow finds them (environment, instance roles), not
  Hadoop's `fs.s3a.*` settings.

Any other scheme (`viewfs://`, `har://`, `webhdfs://`, ...) is one line saying so. A file is
read whole into a temporary file where it is decoded (the capture readers want a seekable
local file), once per task.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import IO, Any

URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
GLOB = re.compile(r"[*?\[]")
HTTP = ("http", "https")
#: seconds an HTTP request may wait
TIMEOUT = 60.0


class RemoteError(ValueError):
    """A URI that cannot be listed or read: one line for the user."""


def scheme(path: str) -> str | None:
    """The URI's scheme (lower case), or None for a local path (`file://` is local)."""
    found = URI.match(path)
    if found is None or found.group(1).lower() == "file":
        return None
    return found.group(1).lower()


def _arrow(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path in it) for `uri`, or RemoteError."""
    import pyarrow.fs as pafs

    kind = scheme(uri) or ""
    target = "s3" + uri[len("s3a") :] if kind == "s3a" else uri
    try:
        fs, path = pafs.FileSystem.from_uri(target)
    except Exception as exc:  # ArrowInvalid (unknown scheme), OSError (libhdfs, network)
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "Unrecognized filesystem type" in text or "Unknown" in text or kind == "viewfs":
            raise RemoteError(
                f"amqp: {uri}: the data source's Python workers read http(s):// and what pyarrow "
                f"reads (s3a://, s3://, gs://, abfs://, hdfs:// with libhdfs), not {kind}://; "
                f"`amqpscope spark` reads any Hadoop URI"
            ) from None
        raise RemoteError(f"amqp: {uri}: cannot open it with pyarrow: {text}") from None
    return fs, path


def _rebuild(uri: str, path: str) -> str:
    """The URI of `path`, a path in the filesystem of `uri` (as pyarrow names it)."""
    found = URI.match(uri)
    assert found is not None
    rest = uri[found.end() :]
    authority = rest.split("/", 1)[0]
    kind = found.group(1)
    if kind.lower() in ("s3", "s3a", "gs", "gcs"):  # the bucket is the path's first part
        return f"{kind}://{path.lstrip('/')}"
    return f"{kind}://{authority}/{path.lstrip('/')}"


def _hidden(relative: str) -> bool:
    return any(part[:1] in (".", "_") for part in relative.split("/") if part)


def list_files(uri: str) -> list[tuple[str, bool]]:
    """The files `uri` names: `(uri, named outright)` for a file, a folder's files walked (names
    starting with `.` or `_` skipped), or a glob's matches, in name order."""
    kind = scheme(uri)
    if kind in HTTP:
        if GLOB.search(uri.split("?", 1)[0]) or uri.endswith("/"):
            raise RemoteError(f"amqp: {uri}: HTTP lists no folders or globs: name each file")
        return [(uri, True)]
    import pyarrow.fs as pafs

    fs, path = _arrow(uri)
    try:
        if not GLOB.search(path):
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                raise RemoteError(f"amqp: {uri}: no such file or folder")
            if info.type != pafs.FileType.Directory:
                return [(uri, True)]
            found = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            files = [
                f.path
                for f in found
                if f.type == pafs.FileType.File and not _hidden(f.path[len(path) :])
            ]
            return [(_rebuild(uri, p), False) for p in sorted(files)]
        parts = path.split("/")
        fixed = next(i for i, part in enumerate(parts) if GLOB.search(part))
        base = "/".join(parts[:fixed]) or "/"
        found = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        matched = sorted(
            f.path for f in found if f.type == pafs.FileType.File and fnmatch.fnmatch(f.path, path)
        )
    except RemoteError:
        raise
    except Exception as exc:
        raise RemoteError(f"amqp: {uri}: {str(exc).splitlines()[0]}") from None
    if not matched:
        raise RemoteError(f"amqp: {uri}: no such files")
    return [(_rebuild(uri, p), True) for p in matched]


def folder_entries(uri: str) -> list[tuple[str, float, int]]:
    """`(uri, mtime, size)` of the visible files directly in the folder at `uri` (not below it;
    names starting with `.` or `_` skipped), for a stream over a remote folder. RemoteError
    when it is no folder or cannot be listed (HTTP lists none)."""
    if scheme(uri) in HTTP:
        raise RemoteError(f"amqp: {uri}: HTTP lists no folders: a stream reads a folder")
    fs, path = _arrow(uri)
    try:
        return [(_rebuild(uri, p), mtime, size) for p, mtime, size in listing(fs, path)]
    except RemoteError:
        raise
    except Exception as exc:
        raise RemoteError(f"amqp: {uri}: {str(exc).splitlines()[0]}") from None


def listing(fs: Any, path: str) -> list[tuple[str, float, int]]:
    """`(path, mtime, size)` of the visible files directly in folder `path` of the pyarrow
    filesystem `fs` (mtime 0 where the filesystem keeps none)."""
    import pyarrow.fs as pafs

    info = fs.get_file_info(path)
    if info.type != pafs.FileType.Directory:
        raise RemoteError(f"amqp: {path}: no such folder")
    out = []
    for found in fs.get_file_info(pafs.FileSelector(path, recursive=False)):
        name = found.path.rstrip("/").rsplit("/", 1)[-1]
        if found.type != pafs.FileType.File or name[:1] in (".", "_"):
            continue
        mtime = found.mtime.timestamp() if found.mtime is not None else 0.0
        out.append((found.path, mtime, int(found.size or 0)))
    return out


def _open(uri: str) -> IO[bytes]:
    if scheme(uri) in HTTP:
        import urllib.error  # here: a planner that reads local files does not load urllib
        import urllib.request

        try:
            return urllib.request.urlopen(uri, timeout=TIMEOUT)  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            raise RemoteError(f"amqp: {uri}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RemoteError(f"amqp: {uri}: cannot read it: {reason}") from None
    fs, path = _arrow(uri)
    try:
        return fs.open_input_stream(path)  # type: ignore[no-any-return]
    except Exception as exc:
        raise RemoteError(f"amqp: {uri}: {str(exc).splitlines()[0]}") from None


def head(uri: str, size: int = 4) -> bytes:
    """The first bytes of the file at `uri` (b"" when it cannot be read)."""
    try:
        with _open(uri) as stream:
            return stream.read(size)
    except (RemoteError, OSError):
        return b""


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
    """A local path to read `path` at: itself, or the URI's file fetched into a temporary file
    (removed afterwards). RemoteError when it cannot be fetched."""
    if scheme(path) is None:
        yield path[len("file://") :] if path.startswith("file://") else path
        return
    suffix = ".gz" if path.endswith(".gz") else ".cap"
    with tempfile.NamedTemporaryFile(prefix="amqpscope-", suffix=suffix) as tmp:
        with _open(path) as stream:
            shutil.copyfileobj(stream, tmp, 1 << 20)
        tmp.flush()
        yield tmp.name


def read_bytes(uri: str) -> bytes:
    with _open(uri) as stream:
        return stream.read()


def size(path: str) -> int:
    """Bytes of a local file, or -1 for a URI (not asked for)."""
    return os.path.getsize(path) if scheme(path) is None else -1
