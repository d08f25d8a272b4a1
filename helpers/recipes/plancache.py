"""A persistent cache of serialized cuDNN execution plans (taught in notebook 06).

A serialized plan is valid only for the graph it was built for and on what built it: the GPU model, its SM
count, the driver, the CUDA runtime and both cuDNN versions (the fingerprint). So each entry stores, in a
one-line JSON header before the blob, its key, the fingerprint, the caller's metadata (e.g. the shape), and the
blob's size and SHA-256, and ``get`` verifies all of it before the plan is used. An entry that fails is moved
into ``rejected/`` with a ``PlanCacheWarning`` naming the reason, and the graph is built instead: a plan made for
something else is never run. Entries are written atomically (a temporary file, fsync, ``os.replace``), so a crash
never leaves half an entry under its name.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


class PlanCacheWarning(UserWarning):
    """An entry was refused and moved into ``rejected/``; ``reason`` says why: 'truncated', 'corrupt', 'foreign'
    (another fingerprint), 'mismatch' (another key or metadata) or 'undeserializable' (cuDNN refused the blob)."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"plan cache: {message} — rebuilding")
        self.reason = reason


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


def _as_stored(obj: Any) -> Any:
    """``obj`` as it reads back from the header (tuples as lists, keys sorted), so the two compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


class _Refused(Exception):
    """Why an entry cannot be used: ``reason`` (a ``PlanCacheWarning`` reason) and a message."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass
class CacheResult:
    graph: Any
    source: str    # "built" (nothing stored), "loaded", or "rebuilt" (an entry was refused)
    key: str
    path: Path
    ms: float      # wall time of the load, or of the build and store


class PlanCache:
    """``PlanCache(directory, fingerprint=...)``: one file per key. ``fingerprint`` defaults to
    ``current_fingerprint()``; pass one to use the cache without a GPU."""

    def __init__(self, directory: str | os.PathLike, fingerprint: dict | None = None):
        self.directory = Path(directory)
        self.fingerprint = _as_stored(fingerprint if fingerprint is not None else current_fingerprint())

    @staticmethod
    def graph_key(graph, tag: str = "") -> str:
        """The graph's own key (``graph.key()``: op graph, shapes, strides, dtypes) and a tag (which plan, say)."""
        return f"cudnn-graph-{graph.key()}" + (f"|{tag}" if tag else "")

    def path_for(self, key: str) -> Path:
        """The entry's file, named by the key only: an entry of another fingerprint lands on it and is refused."""
        return self.directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + ".plan")

    def entries(self) -> list[Path]:
        return sorted(self.directory.glob("*.plan"))

    def put(self, key: str, blob: bytes, meta: dict | None = None) -> Path:
        """Store ``blob`` under ``key``, atomically."""
        blob = bytes(blob)
        header = {"key": key, "fingerprint": self.fingerprint, "meta": _as_stored(meta or {}), "size": len(blob),
                  "sha256": hashlib.sha256(blob).hexdigest()}
        path = self.path_for(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def get(self, key: str, meta: dict | None = None) -> bytes | None:
        """The blob stored under ``key``, or None: nothing stored, or the entry refused (a ``PlanCacheWarning``).
        With ``meta``, the stored metadata must equal it (the shape the plan was built for, say)."""
        blob, refused = self._load(key, meta)
        if refused:
            warnings.warn(refused, stacklevel=2)
        return blob

    def _load(self, key: str, meta: dict | None) -> tuple[bytes | None, PlanCacheWarning | None]:
        path = self.path_for(key)
        if not path.exists():
            return None, None
        try:
            return self._verified(path.read_bytes(), key, meta), None
        except _Refused as refused:
            return None, self._reject(path, refused.reason, str(refused))

    def _verified(self, data: bytes, key: str, meta: dict | None) -> bytes:
        """The blob of an entry's bytes once every field of its header holds; else ``_Refused``."""
        line, newline, blob = data.partition(b"\n")
        if not newline:
            raise _Refused("truncated", f"is cut short inside its header ({len(data)} bytes)")
        try:
            header = json.loads(line)
        except ValueError:
            header = None
        if not isinstance(header, dict):
            raise _Refused("corrupt", "has an unreadable header")
        if header.get("key") != key:
            raise _Refused("mismatch", "holds a plan for another graph key")
        if header.get("fingerprint") != self.fingerprint:
            theirs = header.get("fingerprint") or {}
            differ = sorted(k for k in {*theirs, *self.fingerprint} if theirs.get(k) != self.fingerprint.get(k))
            raise _Refused("foreign", f"was built under another {'/'.join(differ) or 'fingerprint'}")
        if meta is not None and header.get("meta") != _as_stored(meta):
            raise _Refused("mismatch", "was stored with other metadata (e.g. another shape)")
        if header.get("size") != len(blob):
            raise _Refused("truncated", f"holds {len(blob)} of {header.get('size')} plan bytes")
        if header.get("sha256") != hashlib.sha256(blob).hexdigest():
            raise _Refused("corrupt", "fails its checksum")
        return blob

    def _reject(self, path: Path, reason: str, why: str) -> PlanCacheWarning:
        """Move the entry into ``rejected/`` under a new name (kept, not deleted); the warning that says so."""
        rejected = self.directory / "rejected"
        rejected.mkdir(exist_ok=True)
        fd, target = tempfile.mkstemp(prefix=f"{path.stem}.{reason}.", suffix=".plan", dir=rejected)
        os.close(fd)
        os.replace(path, target)
        return PlanCacheWarning(reason, f"{path} {why}; moved to {Path(target).relative_to(self.directory)}")

    def get_or_build(self, graph, build_fn: Callable[[Any], Any], handle=None, *, tag: str = "",
                     meta: dict | None = None, new_graph: Callable[[], Any] | None = None) -> CacheResult:
        """``graph``'s plan from the cache, deserialized into a fresh graph (``new_graph()``, default
        ``cudnn.pygraph(handle=handle)``); or, when nothing usable is stored, ``graph`` (constructed, not built)
        built with ``build_fn(graph)``, serialized and stored. Tensors are then bound by UID: give each one."""
        key = self.graph_key(graph, tag)
        start = time.perf_counter()
        blob, refused = self._load(key, meta)
        if blob is not None:
            try:
                loaded = self._deserialize(blob, handle, new_graph)
                return CacheResult(loaded, "loaded", key, self.path_for(key), (time.perf_counter() - start) * 1e3)
            except Exception as exc:  # cuDNN refused a blob that passed every check (a driver change, say)
                refused = self._reject(self.path_for(key), "undeserializable", f"was refused by cuDNN "
                                                                                f"({type(exc).__name__})")
        if refused:
            warnings.warn(refused, stacklevel=2)
        start = time.perf_counter()
        build_fn(graph)
        path = self.put(key, graph.serialize(as_bytes=True), meta=meta)
        return CacheResult(graph, "rebuilt" if refused else "built", key, path, (time.perf_counter() - start) * 1e3)

    @staticmethod
    def _deserialize(blob: bytes, handle, new_graph: Callable[[], Any] | None):
        if new_graph is None:
            from ..libcudnn import load_cudnn

            cudnn = load_cudnn()
            new_graph = lambda: cudnn.pygraph(handle=handle)  # noqa: E731
        fresh = new_graph()
        if handle is None:
            fresh.deserialize(blob)
        else:
            fresh.deserialize(handle, blob)
        return fresh
