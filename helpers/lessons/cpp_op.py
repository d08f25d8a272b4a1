"""Notebook 08's C++ rung: ``cudnn_sdpa_op.cpp`` (the capstone's attention op written against the cuDNN
frontend's C++ API and registered with ``TORCH_LIBRARY``) built with ``torch.utils.cpp_extension``.

``missing_prerequisite()`` says in one line why it cannot be built here (no compiler, no ninja, a header not
found), or None; ``load()`` builds it once per source (torch caches the build under ``TORCH_EXTENSIONS_DIR``)
and returns ``torch.ops.course_cpp``. The fakes and the autograd formula are the notebook's, registered from
Python.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).with_name("cudnn_sdpa_op.cpp")
NAME = "course_cudnn_sdpa_op"
HEADERS = {   # the header -> what provides it, for the message when it is missing
    "cudnn_frontend.h": "the nvidia-cudnn-frontend wheel (its include/ folder)",
    "cudnn.h": "the nvidia-cudnn-cu12/-cu13 wheel torch uses (nvidia/cudnn/include)",
    "cuda_runtime.h": "torch's CUDA runtime wheel (nvidia/cu13/include or nvidia/cuda_runtime/include) or CUDA_HOME",
    "nvrtc.h": "torch's NVRTC wheel (nvidia/cu13/include or nvidia/cuda_nvrtc/include) or CUDA_HOME",
}


def _candidate_dirs() -> list[Path]:
    """Folders that may hold the headers: the frontend wheel's, the nvidia-* wheels' next to torch, CUDA_HOME's."""
    dirs, sites = [], {Path(p) for p in sys.path if p.endswith("-packages")}
    try:   # the folder the frontend is installed in (pip --target folders do not end in -packages)
        import cudnn
        sites.add(Path(cudnn.__file__).parents[1])
    except Exception:   # no frontend: its header is reported missing
        pass
    for site in sorted(sites):
        dirs.append(site / "include")   # nvidia-cudnn-frontend installs its C++ headers here
        nvidia = site / "nvidia"
        if nvidia.is_dir():
            dirs += sorted(nvidia.glob("*/include"))
    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except Exception:   # torch without cpp_extension support: the compiler check reports it
        CUDA_HOME = None
    if CUDA_HOME:
        dirs.append(Path(CUDA_HOME) / "include")
    return [d for d in dirs if d.is_dir()]


def _usable(folder: Path, header: str) -> bool:
    """The header is there, with what it includes from its own folder (a wheel's cuda_runtime.h may come
    without crt/host_defines.h)."""
    companion = {"cuda_runtime.h": "crt/host_defines.h"}.get(header)
    return (folder / header).is_file() and (companion is None or (folder / companion).is_file())


def include_dirs() -> dict[str, Path | None]:
    """Each header in HEADERS -> the first folder that holds it, usable (None: not found)."""
    dirs = _candidate_dirs()
    return {header: next((d for d in dirs if _usable(d, header)), None) for header in HEADERS}


def missing_prerequisite() -> str | None:
    """Why the C++ op cannot be built on this machine (one line), or None."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return (f"needs a C++ compiler: `{compiler}` is not on PATH (install g++, or set CXX to one)")
    try:
        from torch.utils.cpp_extension import is_ninja_available
    except Exception as exc:
        return f"needs torch.utils.cpp_extension ({type(exc).__name__}: {exc})"
    if not is_ninja_available():
        return "needs ninja to build C++ extensions: `pip install ninja`"
    found = include_dirs()
    missing = [f"{header} ({where})" for header, where in HEADERS.items() if found[header] is None]
    if missing:
        return "needs headers that were not found: " + "; ".join(missing)
    return None


def load(verbose: bool = False):
    """Build (first call per source) and load the op; returns ``torch.ops.course_cpp`` with ``sdpa`` and
    ``sdpa_backward`` implemented for CUDA. Raises RuntimeError with the compiler's last lines if the build fails."""
    import torch
    from torch.utils.cpp_extension import load as load_extension

    reason = missing_prerequisite()
    if reason:
        raise RuntimeError(f"the C++ op {reason}")
    found = include_dirs()   # the CUDA runtime's folder first: a later folder may hold an incomplete copy of it
    dirs = list(dict.fromkeys(str(found[h]) for h in ("cuda_runtime.h", "cudnn.h", "cudnn_frontend.h", "nvrtc.h")))
    started = time.perf_counter()
    try:
        load_extension(name=NAME, sources=[str(SOURCE)], extra_include_paths=dirs, is_python_module=False,
                       extra_cflags=["-O2", "-DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING"],
                       extra_ldflags=["-lc10_cuda"], verbose=verbose)
    except Exception as exc:   # the compiler's output is long: keep its last lines, where the error is
        tail = "\n".join(str(exc).strip().splitlines()[-6:])
        raise RuntimeError(f"building {SOURCE.name} failed ({type(exc).__name__}):\n{tail}") from None
    load.seconds = time.perf_counter() - started
    return torch.ops.course_cpp


load.seconds = 0.0   # how long the last load() took: a first build compiles, later ones reuse torch's cache
