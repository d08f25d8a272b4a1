"""A persistent cache of serialized cuDNN execution plans (taught in notebook 06).

A serialized plan is only valid on the GPU model and the cuDNN backend/frontend
versions that built it, and only for the graph (shapes, dtypes, layouts) it was
built for. The cache therefore stores, next to each blob, what it depends on and
checks all of it on load:

    MAGIC | header length (u32 LE) | header (JSON, utf-8) | blob

The header holds the format, the full key, the fingerprint (GPU model, SM
version and SM count, driver, CUDA runtime, cuDNN backend and frontend), caller
metadata (e.g. the shape), and the blob's size and SHA-256.
An entry that is truncated, corrupt, from another fingerprint, stored under
another key or with other metadata is never returned: ``get`` warns
(``PlanCacheWarning``, with a ``reason``), deletes the entry and returns None,
so the caller rebuilds. Writes go to a temporary file in the same folder and
are moved into place with ``os.replace`` (atomic), so a crash mid-write never
leaves half an entry under the real name.

The file layer (``get``/``put``) needs no GPU and no cuDNN; ``get_or_build``
adds the graph side on top.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MAGIC = b"CUDNNCOURSEPLAN\0"
FORMAT = 1
SUFFIX = ".plan"
_LEN = struct.Struct("<I")


class PlanCacheWarning(UserWarning):
    """An unusable cache entry was dropped; ``reason`` says why (one word)."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"plan cache: {message} — rebuilding")
        self.reason = reason


def current_fingerprint() -> dict:
    """What a serialized plan depends on, for this process (needs a GPU).

    The GPU model, its SM version and SM count (a MIG slice or a cut-down SKU of the same model has fewer SMs,
    and tile choices depend on them), the driver (it loads the plan's kernels), the CUDA runtime torch ships,
    and the cuDNN backend and frontend versions. Any change rebuilds every entry once: that is the price of
    never running a plan made for something else. ``driver`` is None where ``nvidia-smi`` is missing."""
    from ..device import require_gpu, versions
    from ..libcudnn import load_cudnn

    cudnn = load_cudnn()
    d = require_gpu()
    v = versions()
    return {"gpu": d.name, "sm": d.sm_version, "sm_count": int(d.sm_count), "driver": v.get("driver"),
            "cuda_runtime": v.get("cuda (torch build)"), "cudnn_backend": int(cudnn.backend_version()),
            "cudnn_frontend": str(cudnn.__version__)}


def _canonical(obj: Any) -> Any:
    """JSON round trip, so tuples/lists and int/str keys compare the way they are stored."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


@dataclass
class CacheResult:
    graph: Any
    source: str          # "built" (nothing usable stored), "loaded", or "rebuilt" (an entry was dropped)
    key: str
    path: Path
    ms: float            # wall time of the build or the load
    warnings: list = field(default_factory=list)


class PlanCache:
    """``PlanCache(directory, fingerprint=...)``: one file per key.

    ``fingerprint`` defaults to :func:`current_fingerprint` (GPU model, SM version
    and count, driver, CUDA runtime, cuDNN backend and frontend). Pass one
    explicitly to use the file layer without a GPU.
    """

    def __init__(self, directory: str | os.PathLike, fingerprint: dict | None = None):
        self.directory = Path(directory)
        self.fingerprint = _canonical(fingerprint if fingerprint is not None else current_fingerprint())

    # ------------------------------------------------------------ file layer
    def path_for(self, key: str) -> Path:
        """The entry's file. Named by the key only: an entry written under another
        fingerprint lands on the same name and is detected (and replaced) on load."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"cache key must be a non-empty string, got {key!r}")
        return self.directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + SUFFIX)

    def put(self, key: str, blob: bytes, meta: dict | None = None) -> Path:
        """Store ``blob`` under ``key`` atomically (temp file + fsync + os.replace)."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"blob must be bytes, got {type(blob).__name__} (use serialize(as_bytes=True))")
        blob = bytes(blob)
        path = self.path_for(key)
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
        """Parse one entry file; ``ValueError(reason, message)`` if it is damaged."""
        data = path.read_bytes()
        start = len(MAGIC) + _LEN.size
        if len(data) < start:
            raise ValueError("truncated", f"{path.name} is truncated ({len(data)} bytes)")
        if data[: len(MAGIC)] != MAGIC:
            raise ValueError("corrupt", f"{path.name} is not a plan cache entry (bad magic)")
        (length,) = _LEN.unpack_from(data, len(MAGIC))
        if len(data) < start + length:
            raise ValueError("truncated", f"{path.name} is truncated inside its header")
        try:
            header = json.loads(data[start : start + length].decode("utf-8"))
            if not isinstance(header, dict):
                raise TypeError("header is not an object")
        except (UnicodeDecodeError, ValueError, TypeError) as exc:
            raise ValueError("corrupt", f"{path.name} has an unreadable header ({exc})") from None
        return header, data[start + length :]

    def get(self, key: str, meta: dict | None = None) -> bytes | None:
        """The blob stored under ``key``, or None (missing, or dropped with a warning).

        With ``meta``, the stored metadata must equal it (e.g. the shape the plan
        was built for)."""
        path = self.path_for(key)
        if not path.exists():
            return None
        try:
            header, blob = self.read_header(path)
            self._verify(header, blob, key, meta, path.name)
        except ValueError as exc:
            reason, message = exc.args if len(exc.args) == 2 else ("corrupt", str(exc))
            self._drop(path)
            warnings.warn(PlanCacheWarning(reason, message), stacklevel=2)
            return None
        except OSError as exc:
            warnings.warn(PlanCacheWarning("unreadable", f"{path.name} cannot be read ({exc})"), stacklevel=2)
            return None
        return blob

    def _verify(self, header: dict, blob: bytes, key: str, meta: dict | None, name: str) -> None:
        if header.get("format") != FORMAT:
            raise ValueError("foreign", f"{name} has format {header.get('format')!r}, this cache reads {FORMAT}")
        if header.get("key") != key:
            raise ValueError("mismatch", f"{name} holds a plan for another graph key")
        if header.get("fingerprint") != self.fingerprint:
            theirs = header.get("fingerprint") or {}
            diff = sorted(k for k in set(theirs) | set(self.fingerprint) if theirs.get(k) != self.fingerprint.get(k))
            raise ValueError("foreign", f"{name} was built under another {'/'.join(diff) or 'fingerprint'}")
        if meta is not None and header.get("meta") != _canonical(meta):
            raise ValueError("mismatch", f"{name} was stored with other metadata (e.g. another shape)")
        if header.get("size") != len(blob):
            raise ValueError("truncated", f"{name} holds {len(blob)} of {header.get('size')} plan bytes")
        if header.get("sha256") != hashlib.sha256(blob).hexdigest():
            raise ValueError("corrupt", f"{name} fails its checksum")

    @staticmethod
    def _drop(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    def entries(self) -> list[Path]:
        return sorted(self.directory.glob("*" + SUFFIX)) if self.directory.exists() else []

    def clear(self) -> None:
        for path in self.entries():
            self._drop(path)

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
                    self._drop(path)
                    warnings.warn(PlanCacheWarning("undeserializable",
                                                   f"{path.name} was refused by cuDNN ({type(exc).__name__})"))
            ms = (time.perf_counter() - t0) * 1e3
        dropped = [w.message for w in caught if issubclass(w.category, PlanCacheWarning)]
        for w in caught:  # re-emit everything we caught, so the caller sees it too
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if loaded is not None:
            return CacheResult(loaded, "loaded", key, path, ms, dropped)
        t0 = time.perf_counter()
        build_fn(graph)
        self.put(key, graph.serialize(as_bytes=True), meta=meta)
        ms = (time.perf_counter() - t0) * 1e3
        return CacheResult(graph, "rebuilt" if dropped else "built", key, path, ms, dropped)
