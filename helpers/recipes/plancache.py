"""A persistent cache of serialized cuDNN execution plans (taught in notebook 06).

A serialized plan is only valid on the GPU model and the cuDNN backend/frontend
versions that built it, and only for the graph (shapes, dtypes, layouts) it was
built for. The cache therefore stores, next to each blob, what it depends on and
checks all of it on load:

    MAGIC | header length (u32 LE) | header (JSON, utf-8) | blob

The header holds the format, the full key, the fingerprint (GPU model, SM
version and SM count, driver, CUDA runtime, cuDNN backend and frontend), caller
metadata (e.g. the shape), and the blob's size and SHA-256.

The cache touches only its own entries: a file named like one (``<32 hex>.plan``,
from the key) that starts with MAGIC (an empty or shorter file that is a
beginning of MAGIC counts as an entry cut short). Anything else in the folder —
a user's ``my_graph.plan``, a raw ``serialize()`` blob, a link, a folder — is never
moved, overwritten or deleted, whatever its suffix.

An entry that is truncated, corrupt, from another fingerprint, stored under
another key or with other metadata is never returned: ``get`` warns
(``PlanCacheWarning``, with a ``reason``), moves the entry aside into
``rejected/`` under a unique name (``rejected()`` lists them; the warning's
``moved_to`` says where) and returns None, so the caller rebuilds. When a key's
file is *not* an entry (someone else's file under that name), ``get`` warns with
reason ``'not-an-entry'``, leaves it untouched and returns None, and ``put``
refuses to overwrite it: it raises ``PlanCacheError`` naming the file
(``get_or_build`` then returns the graph it built, unstored, ``stored=False``).
Writes go to a temporary file in the same folder and are moved into place with
``os.replace`` (atomic), so a crash mid-write never leaves half an entry under
the real name. ``clear()`` removes the cache's own entries and nothing else, and returns the files it left alone
(``other_files()``). Every warning and error names the file it is about by its full path (a moved entry's new place
as ``rejected/<name>`` beside it).

The file layer (``get``/``put``) needs no GPU and no cuDNN; ``get_or_build``
adds the graph side on top.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import CourseError

MAGIC = b"CUDNNCOURSEPLAN\0"
FORMAT = 1
SUFFIX = ".plan"
REJECTED = "rejected"            # subfolder that rejected entries are moved into
NOT_AN_ENTRY = "not-an-entry"    # the reason for a file the cache did not write
_LEN = struct.Struct("<I")
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.plan")                  # path_for's names
_REJECTED_NAME = re.compile(r"[0-9a-f]{32}\.[a-z-]+\.[A-Za-z0-9_]+\.plan")  # _reject's names


class PlanCacheWarning(UserWarning):
    """An unusable entry was moved aside (``moved_to``), or a key's file is not an entry and was left alone;
    ``reason`` says why: 'truncated', 'corrupt', 'foreign', 'mismatch', 'undeserializable', 'unreadable' or
    'not-an-entry'."""

    def __init__(self, reason: str, message: str, moved_to: Path | None = None):
        super().__init__(f"plan cache: {message} — rebuilding")
        self.reason = reason
        self.moved_to = moved_to


class PlanCacheError(CourseError):
    """``put`` would overwrite a file the cache did not write."""


# What a serialized plan depends on: the fingerprint's fields, each with why. An entry stored under any other value
# of any of them is refused as foreign, so a change rebuilds every entry once: the price of never running a plan
# made for something else.
FINGERPRINT_FIELDS = {
    "gpu": "the GPU model: the plan's kernels and tile choices were made for it",
    "sm": "its SM version (the architecture the kernels were compiled for)",
    "sm_count": "its SM count: a MIG slice or a cut-down part of the same model has fewer, and tile choices depend on it",
    "driver": "the driver: it loads and launches the plan's kernels",
    "cuda_runtime": "the CUDA runtime torch ships, which the kernels run on",
    "cudnn_backend": "the cuDNN backend: the blob's format and the engines inside it are its own",
    "cudnn_frontend": "the cuDNN frontend: it writes the blob around the backend's plan (and a Python engine's recipe)",
}


def current_fingerprint() -> dict:
    """This process's value of every ``FINGERPRINT_FIELDS`` entry (needs a GPU): the course's one fingerprint, which
    ``PlanCache`` stores in every entry and compares on load (notebook 06's exercise compares against it too).
    ``driver`` is None where ``nvidia-smi`` is missing."""
    from ..device import require_gpu, versions
    from ..libcudnn import load_cudnn

    cudnn = load_cudnn()
    d = require_gpu()
    v = versions()
    return {"gpu": d.name, "sm": d.sm_version, "sm_count": int(d.sm_count), "driver": v.get("driver"),
            "cuda_runtime": v.get("cuda (torch build)"), "cudnn_backend": int(cudnn.backend_version()),
            "cudnn_frontend": str(cudnn.__version__)}


def _is_own(path: Path, name: re.Pattern) -> bool:
    """A file this cache wrote: one of its names, a regular file, and MAGIC (or a beginning of it) first."""
    if not name.fullmatch(path.name) or path.is_symlink() or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError:
        return False
    return head == MAGIC[: len(head)]


def _canonical(obj: Any) -> Any:
    """JSON round trip, so tuples/lists and int/str keys compare the way they are stored."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


@dataclass
class CacheResult:
    graph: Any
    source: str          # "built" (nothing usable stored), "loaded", or "rebuilt" (an entry was rejected)
    key: str
    path: Path
    ms: float            # wall time of the build or the load
    warnings: list = field(default_factory=list)
    stored: bool = True  # False when the key's file is not an entry, so the new plan was not written there


class PlanCache:
    """``PlanCache(directory, fingerprint=...)``: one file per key.

    ``fingerprint`` defaults to :func:`current_fingerprint` (``FINGERPRINT_FIELDS``: GPU model, SM version
    and count, driver, CUDA runtime, cuDNN backend and frontend). Pass one
    explicitly to use the file layer without a GPU.
    """

    def __init__(self, directory: str | os.PathLike, fingerprint: dict | None = None):
        self.directory = Path(directory)
        self.fingerprint = _canonical(fingerprint if fingerprint is not None else current_fingerprint())

    # ------------------------------------------------------------ file layer
    def path_for(self, key: str) -> Path:
        """The entry's file. Named by the key only: an entry written under another
        fingerprint lands on the same name and is detected (and moved aside) on load."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"cache key must be a non-empty string, got {key!r}")
        return self.directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + SUFFIX)

    @staticmethod
    def is_entry(path: str | os.PathLike) -> bool:
        """Whether ``path`` is one of the cache's own entries: named like one (``<32 hex>.plan``), a regular
        file (not a link), and its bytes start with MAGIC (or are a beginning of it: an entry cut short)."""
        return _is_own(Path(path), _ENTRY_NAME)

    def put(self, key: str, blob: bytes, meta: dict | None = None) -> Path:
        """Store ``blob`` under ``key`` atomically (temp file + fsync + os.replace).

        Raises ``PlanCacheError`` rather than overwrite a file at the key's path that is not an entry."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"blob must be bytes, got {type(blob).__name__} (use serialize(as_bytes=True))")
        blob = bytes(blob)
        path = self.path_for(key)
        if (path.exists() or path.is_symlink()) and not self.is_entry(path):
            raise PlanCacheError(f"{path} is not a plan-cache entry, so the plan for this key is not stored "
                                 "(the file is left as it is): move it elsewhere, or use another cache folder")
        header = {"format": FORMAT, "key": key, "fingerprint": self.fingerprint, "meta": _canonical(meta or {}),
                  "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
        text = json.dumps(header, sort_keys=True).encode("utf-8")
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + _LEN.pack(len(text)) + text + blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def read_header(self, path: Path) -> tuple[dict, bytes]:
        """Parse one entry file; ``ValueError(reason, message)`` if it is damaged or not an entry."""
        data = path.read_bytes()
        start = len(MAGIC) + _LEN.size
        head = data[: len(MAGIC)]
        if head != MAGIC[: len(head)]:  # checked first: a short file of someone else's is not "truncated"
            raise ValueError(NOT_AN_ENTRY, f"{path} is not a plan-cache entry (no {MAGIC[:-1].decode()} header): "
                                           "left untouched, and this key's plan is not stored over it")
        if len(data) < start:
            raise ValueError("truncated", f"{path} is truncated ({len(data)} bytes)")
        (length,) = _LEN.unpack_from(data, len(MAGIC))
        if len(data) < start + length:
            raise ValueError("truncated", f"{path} is truncated inside its header")
        try:
            header = json.loads(data[start : start + length].decode("utf-8"))
            if not isinstance(header, dict):
                raise TypeError("header is not an object")
        except (UnicodeDecodeError, ValueError, TypeError) as exc:
            raise ValueError("corrupt", f"{path} has an unreadable header ({exc})") from None
        return header, data[start + length :]

    def get(self, key: str, meta: dict | None = None) -> bytes | None:
        """The blob stored under ``key``, or None: missing, or refused with a ``PlanCacheWarning`` (an entry is
        moved into ``rejected/``; a file that is not an entry is left where it is).

        With ``meta``, the stored metadata must equal it (e.g. the shape the plan
        was built for)."""
        path = self.path_for(key)
        if not (path.exists() or path.is_symlink()):
            return None
        if path.is_symlink() or not path.is_file():  # a link, a folder: never the cache's own
            warnings.warn(PlanCacheWarning(NOT_AN_ENTRY, f"{path} is not a plan-cache entry (not a regular file): "
                                                         "left untouched"), stacklevel=2)
            return None
        try:
            header, blob = self.read_header(path)
            self._verify(header, blob, key, meta, path)
        except ValueError as exc:
            reason, message = exc.args if len(exc.args) == 2 else ("corrupt", str(exc))
            moved = None
            if reason != NOT_AN_ENTRY:
                moved = self._reject(path, reason)
                message += self._where(moved)
            warnings.warn(PlanCacheWarning(reason, message, moved), stacklevel=2)
            return None
        except OSError as exc:
            warnings.warn(PlanCacheWarning("unreadable", f"{path} cannot be read ({exc})"), stacklevel=2)
            return None
        return blob

    def _verify(self, header: dict, blob: bytes, key: str, meta: dict | None, path: Path) -> None:
        if header.get("format") != FORMAT:
            raise ValueError("foreign", f"{path} has format {header.get('format')!r}, this cache reads {FORMAT}")
        if header.get("key") != key:
            raise ValueError("mismatch", f"{path} holds a plan for another graph key")
        if header.get("fingerprint") != self.fingerprint:
            theirs = header.get("fingerprint") or {}
            diff = sorted(k for k in set(theirs) | set(self.fingerprint) if theirs.get(k) != self.fingerprint.get(k))
            raise ValueError("foreign", f"{path} was built under another {'/'.join(diff) or 'fingerprint'}")
        if meta is not None and header.get("meta") != _canonical(meta):
            raise ValueError("mismatch", f"{path} was stored with other metadata (e.g. another shape)")
        if header.get("size") != len(blob):
            raise ValueError("truncated", f"{path} holds {len(blob)} of {header.get('size')} plan bytes")
        if header.get("sha256") != hashlib.sha256(blob).hexdigest():
            raise ValueError("corrupt", f"{path} fails its checksum")

    @property
    def rejected_dir(self) -> Path:
        return self.directory / REJECTED

    def _reject(self, path: Path, reason: str) -> Path | None:
        """Move an entry into ``rejected/`` under a new, unique name; where it went (None if it could not move)."""
        try:
            self.rejected_dir.mkdir(parents=True, exist_ok=True)
            fd, target = tempfile.mkstemp(prefix=f"{path.stem}.{reason}.", suffix=SUFFIX, dir=self.rejected_dir)
            os.close(fd)
        except OSError:
            return None
        try:
            os.replace(path, target)  # over the placeholder that reserved the name
        except OSError:
            Path(target).unlink(missing_ok=True)
            return None
        return Path(target)

    def _where(self, moved: Path | None) -> str:
        if moved is None:
            return f"; left in place (it could not be moved into {REJECTED}/)"
        return f"; moved to {moved.relative_to(self.directory)}"   # beside the file just named

    @staticmethod
    def _own_files(folder: Path, name: re.Pattern) -> list[Path]:
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if _is_own(p, name))

    def entries(self) -> list[Path]:
        """The cache's own entries (other files in the folder are not listed)."""
        return self._own_files(self.directory, _ENTRY_NAME)

    def rejected(self) -> list[Path]:
        """Entries that ``get`` (or ``get_or_build``) refused and moved aside, in ``rejected/``."""
        return self._own_files(self.rejected_dir, _REJECTED_NAME)

    def other_files(self) -> list[Path]:
        """What is in the folder (and in ``rejected/``) that the cache did not write: a user's files, links, folders,
        another process's temp file mid-write. The cache never moves, overwrites or deletes any of them."""
        rejected_dir = self.rejected_dir if self.rejected_dir.is_dir() and not self.rejected_dir.is_symlink() else None
        own = {*self.entries(), *self.rejected(), rejected_dir}
        folders = [f for f in (self.directory, rejected_dir) if f is not None and f.is_dir()]
        return sorted(p for folder in folders for p in folder.iterdir() if p not in own)

    def clear(self, rejected: bool = False) -> list[Path]:
        """Delete the cache's own entries; with ``rejected=True``, also the rejected ones. Files the cache did
        not write stay, whatever their name or suffix (and so do temp files another process may be writing):
        returns them (``other_files()``), so a folder that is not empty afterwards says why."""
        doomed = self.entries()
        if rejected:
            doomed += self.rejected()
        for path in doomed:
            path.unlink(missing_ok=True)
        if rejected:
            try:
                self.rejected_dir.rmdir()  # only if nothing else is in it
            except OSError:
                pass
        return self.other_files()

    # ------------------------------------------------------------ graph layer
    @staticmethod
    def graph_key(graph, tag: str = "") -> str:
        """The graph's own key (``graph.key()``: op graph, shapes, strides, dtypes)
        plus an optional tag (e.g. which plan was chosen)."""
        return f"cudnn-graph-{graph.key()}" + (f"|{tag}" if tag else "")

    def get_or_build(self, graph, build_fn: Callable[[Any], Any], handle=None, *, tag: str = "",
                     meta: dict | None = None, new_graph: Callable[[], Any] | None = None) -> CacheResult:
        """Load ``graph``'s plan from the cache, or build it with ``build_fn(graph)`` and store it.

        ``graph`` is a constructed (not yet built) graph: its key decides the entry.
        On a hit, the blob is deserialized into a fresh graph (``new_graph()``,
        default ``cudnn.pygraph(handle=handle)``) and that graph is returned; on a
        miss, or when the stored entry is unusable or fails to deserialize, ``graph``
        itself is built, serialized and stored. Inputs and outputs are then bound by
        UID, so give every tensor an explicit UID.
        """
        key = self.graph_key(graph, tag)
        path = self.path_for(key)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PlanCacheWarning)
            t0 = time.perf_counter()
            blob = self.get(key, meta=meta)
            loaded = None
            if blob is not None:
                if new_graph is None:
                    from ..libcudnn import load_cudnn

                    cudnn = load_cudnn()
                    new_graph = lambda: cudnn.pygraph(handle=handle)  # noqa: E731
                try:
                    fresh = new_graph()
                    if handle is None:
                        fresh.deserialize(blob)
                    else:
                        fresh.deserialize(handle, blob)
                    loaded = fresh
                except Exception as exc:  # the library refused it (e.g. a driver change): rebuild
                    moved = self._reject(path, "undeserializable")
                    warnings.warn(PlanCacheWarning("undeserializable", f"{path} was refused by cuDNN "
                                                   f"({type(exc).__name__}){self._where(moved)}", moved))
            ms = (time.perf_counter() - t0) * 1e3
        dropped = [w.message for w in caught if issubclass(w.category, PlanCacheWarning)]
        for w in caught:  # re-emit everything we caught, so the caller sees it too
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if loaded is not None:
            return CacheResult(loaded, "loaded", key, path, ms, dropped)
        t0 = time.perf_counter()
        build_fn(graph)
        try:
            self.put(key, graph.serialize(as_bytes=True), meta=meta)
            stored = True
        except PlanCacheError:  # someone else's file holds the key's name: get() has already warned
            stored = False
        ms = (time.perf_counter() - t0) * 1e3
        rebuilt = any(w.reason != NOT_AN_ENTRY for w in dropped)
        return CacheResult(graph, "rebuilt" if rebuilt else "built", key, path, ms, dropped, stored)
