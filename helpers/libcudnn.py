"""Find and load libcudnn before ``import cudnn``.

The frontend wheel ships no cuDNN runtime. At import it dlopens the first
libcudnn it finds: ``libcudnn.so.9`` / ``libcudnn.so`` in a folder of
``LD_LIBRARY_PATH``, then ``nvidia/cudnn/lib`` and ``nvidia/cudnn_jit/lib`` in
the interpreter's site-packages, then the system loader. That goes wrong in three
common ways: the runtime lives in another environment (e.g. ``--target``
installs, Colab's system site), torch already loaded a *different* copy, or no
copy exists and the error only appears at the first call ("Unable to find
symbol cudnnGetVersion"). ``load_cudnn`` picks one library on purpose — the one
torch uses when there is one — points the frontend at it, and fails early with
one line when there is none.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import CudnnNotFoundError

_SONAMES = ("libcudnn.so.9", "libcudnn.so")


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str  # where it was found, for the report


def _loaded_libcudnn() -> str | None:
    """Path of the libcudnn already mapped into this process, if any (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.rsplit(None, 1)[-1]
                if "/libcudnn.so" in name:
                    return name
    except OSError:
        pass
    return None


def _package_dirs(package: str) -> list[Path]:
    """Folders of a (possibly namespace) package; ``__file__`` is None for those."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def candidates() -> list[Candidate]:
    """Every libcudnn this process could load, most preferred first."""
    found: list[Candidate] = []

    def add(path: str | os.PathLike, source: str) -> None:
        path = os.path.realpath(path)
        if os.path.isfile(path) and all(c.path != path for c in found):
            found.append(Candidate(path, source))

    def add_dir(folder: str | os.PathLike, source: str) -> None:
        for soname in _SONAMES:
            add(os.path.join(folder, soname), source)
        for path in sorted(glob.glob(os.path.join(folder, "libcudnn.so.9*"))):
            add(path, source)

    loaded = _loaded_libcudnn()
    if loaded:
        add(loaded, "already loaded (by torch)")
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if folder:
            add_dir(folder, "LD_LIBRARY_PATH")
    for pkg_dir in _package_dirs("nvidia.cudnn"):  # nvidia-cudnn-cu12 / -cu13 wheels
        add_dir(pkg_dir / "lib", "nvidia-cudnn wheel")
    for cu in ("cu13", "cu12"):
        for pkg_dir in _package_dirs(f"nvidia.{cu}"):
            add_dir(pkg_dir / "lib", f"nvidia-{cu} wheel")
    for pkg_dir in _package_dirs("torch"):
        add_dir(pkg_dir / "lib", "bundled with torch")
    for var in ("CUDNN_PATH", "CUDNN_HOME", "CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            add_dir(Path(os.environ[var]) / "lib64", var)
            add_dir(Path(os.environ[var]) / "lib", var)
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/cuda/lib64", "/usr/lib64"):
        add_dir(folder, "system")
    system = ctypes.util.find_library("cudnn")
    if system:
        for folder in ("/usr/lib", "/usr/local/lib"):
            add(os.path.join(folder, system), "system loader")
    return found


def _torch_loads_cudnn() -> None:
    """Let torch load its own cuDNN first, so the frontend shares that copy."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cudnn.version()
    except Exception:  # torch missing or broken: the candidate search still runs
        pass


def load_cudnn(verbose: bool = False):
    """Import and return the ``cudnn`` module with a working backend library.

    Raises ``CudnnNotFoundError`` (one line: what was searched, what to install)
    when no libcudnn can be loaded.
    """
    if "cudnn" not in sys.modules:
        _torch_loads_cudnn()
        found = candidates()
        if found:
            chosen = found[0]
            ctypes.CDLL(chosen.path, mode=ctypes.RTLD_GLOBAL)
            # The frontend honours LD_LIBRARY_PATH first: point it at our choice.
            # (Without a libcudnn.so.9 there, its soname lookup finds the copy we just loaded.)
            folder = os.path.dirname(chosen.path)
            if os.path.exists(os.path.join(folder, "libcudnn.so.9")):
                rest = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != folder]
                os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([folder, *rest])
    import cudnn

    try:
        cudnn.backend_version()
    except Exception as exc:
        searched = ", ".join(sorted({c.source for c in candidates()})) or "nothing found"
        raise CudnnNotFoundError(
            "cuDNN frontend imported, but no libcudnn.so.9 could be loaded "
            f"({exc}). Install a runtime: `pip install nvidia-cudnn-cu12` (CUDA 12) or "
            "`nvidia-cudnn-cu13` (CUDA 13), or add its folder to LD_LIBRARY_PATH. "
            f"Searched: {searched}."
        ) from None
    if verbose:
        print(f"cuDNN backend {cudnn.backend_version_string()} from {loaded_library()}")
    return cudnn


def loaded_library() -> str | None:
    """Which libcudnn file this process is using (None before it is loaded)."""
    return _loaded_libcudnn()
