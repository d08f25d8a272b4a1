"""Find and load libcudnn before ``import cudnn``.

The frontend wheel ships no cuDNN runtime: at import it dlopens the first libcudnn it finds (``LD_LIBRARY_PATH``,
then the ``nvidia/cudnn`` wheels, then the system loader). That goes wrong in three common ways: the runtime lives
in another environment, torch already loaded a *different* copy, or there is none and the error only appears at the
first call ("Unable to find symbol cudnnGetVersion"). ``load_cudnn`` picks one library on purpose — the one torch
uses when there is one — points the frontend at it, and fails early, in one line, for each set-up failure it can
see. A broken first choice is reported, not skipped for the next copy: that would hide which cuDNN runs (and so a
version mismatch), and the frontend's own search would still stop at it. Sub-libraries load lazily, at the first
handle, so two copies mixed only later are not seen here.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import CudnnLoadError, CudnnNotFoundError, CudnnVersionError, compact_warnings, one_line

_SONAMES = ("libcudnn.so.9", "libcudnn.so")
MIN_BACKEND = 90000     # cuDNN 9.0.0, the oldest backend the course supports (cuDNN 9 numbers versions 9xxyy)
_verified = None        # the cudnn module once load_cudnn has checked it: later calls return it at once


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str  # where it was found, for the report


def _mapped_libcudnn(maps: str = "/proc/self/maps") -> list[str]:
    """Every libcudnn file (the main library and its sub-libraries) mapped into this process, in map order (Linux)."""
    try:
        with open(maps) as lines:
            names = [line.rsplit(None, 1)[-1] for line in lines]
    except OSError:
        return []
    return [name for name in names if re.match(r"libcudnn(_[a-z_]+)?\.so", os.path.basename(name))]


def loaded_library() -> str | None:
    """Which libcudnn file this process is using (None before it is loaded)."""
    return next((name for name in _mapped_libcudnn() if os.path.basename(name).startswith("libcudnn.so")), None)


def loaded_copies(maps: str = "/proc/self/maps") -> list[str]:
    """The folders of every libcudnn file (main library and sub-libraries) mapped into this process (Linux)."""
    return sorted({os.path.dirname(os.path.realpath(name)) for name in _mapped_libcudnn(maps)})


def _package_dirs(package: str) -> list[Path]:
    """Folders of a (possibly namespace) package; ``__file__`` is None for those."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def libcudnn_candidates() -> list[Candidate]:
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

    loaded = loaded_library()
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


def _what_to_install() -> str:
    """The runtime that matches torch's CUDA (``pip install ...``), or what to do with a CPU-only torch."""
    try:
        import torch

        cuda = torch.version.cuda
    except Exception:  # torch missing or broken
        cuda = "?"
    wheels = "`pip install nvidia-cudnn-cu12` (CUDA 12) or `pip install nvidia-cudnn-cu13` (CUDA 13)"
    if cuda is None:
        return f"this torch is a CPU-only build, which brings no cuDNN — install a CUDA build of torch, or {wheels}"
    major = str(cuda).split(".")[0]
    if major in ("12", "13"):
        return f"install the runtime for torch's CUDA {cuda} (`pip install nvidia-cudnn-cu{major}`)"
    return f"install {wheels}"


def _explain_oserror(path: str, exc: OSError) -> str:
    """What the dynamic loader said about ``path``, in words (ctypes says ``PATH: reason``)."""
    text = one_line(exc)
    text = text[len(path) + 2:] if text.startswith(path + ": ") else text
    if "file too short" in text:
        return f"{text} (empty or cut short: not a shared library)"
    if "invalid ELF header" in text:
        return f"{text} (not a shared library: a text file, an error page, a git-lfs pointer?)"
    if "wrong ELF class" in text:
        return f"{text} (built for another architecture)"
    return text


def _broken(path: str, source: str, exc: OSError) -> CudnnLoadError:
    if source == "LD_LIBRARY_PATH":
        fix = f"take {os.path.dirname(path)} off LD_LIBRARY_PATH or put a working copy there"
    elif "wheel" in source:
        fix = "reinstall it (`pip install --force-reinstall` the nvidia-cudnn wheel)"
    else:
        fix = "remove or replace it"
    return CudnnLoadError(one_line(
        f"{path} could not be loaded: {_explain_oserror(path, exc)}. It comes first in the search ({source}), "
        f"so no other copy is tried: {fix}, then restart the kernel."))


def _import_frontend():
    """``import cudnn``, with a one-line error when that fails."""
    try:
        import cudnn
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "cudnn":
            raise CudnnNotFoundError("the cuDNN frontend is not installed: `pip install nvidia-cudnn-frontend`, "
                                     "then restart the kernel.") from None
        raise CudnnNotFoundError(one_line(f"the cuDNN frontend cannot be imported ({exc}): reinstall it "
                                          "(`pip install --force-reinstall nvidia-cudnn-frontend`).")) from None
    except OSError as exc:  # its own search (LD_LIBRARY_PATH first) stopped at a file it could not load
        found = re.match(r"(\S*libcudnn[^:\s]*): ", str(exc))
        path = found.group(1) if found else "a libcudnn on LD_LIBRARY_PATH"
        raise _broken(path, "LD_LIBRARY_PATH", exc) from None
    return cudnn


def version_string(version: int) -> str:
    """cuDNN's version number as text: 91900 -> '9.19.0' (cuDNN 9+), 8907 -> '8.9.7' (cuDNN 8)."""
    major, rest = (version // 10000, version % 10000) if version >= 90000 else (version // 1000, version % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _check_backend(cudnn) -> None:
    """One line when the backend is missing, not a cuDNN 9, or mixed with another copy."""
    try:
        version = int(cudnn.backend_version())
    except Exception as exc:
        searched = ", ".join(sorted({c.source for c in libcudnn_candidates()}))
        where = (f"one was found ({searched}), yet the frontend could not use it" if searched else
                 "searched LD_LIBRARY_PATH, the nvidia-cudnn wheels, torch/lib, $CUDNN_PATH, $CUDA_HOME "
                 "and the system folders")
        raise CudnnNotFoundError(one_line(
            f"no usable libcudnn.so.9 ({where}; the frontend says: {exc}): {_what_to_install()}, "
            "then restart the kernel.")) from None
    frontend = getattr(cudnn, "__version__", "?")
    library = loaded_library() or "the libcudnn it found"
    if not MIN_BACKEND <= version < 100000:
        need = f"{version_string(MIN_BACKEND)} or newer" if version < MIN_BACKEND else "9.x, libcudnn.so.9"
        raise CudnnVersionError(one_line(
            f"cuDNN frontend {frontend} loaded cuDNN {version_string(version)} from {library}, but the course needs "
            f"a cuDNN 9 ({need}): {_what_to_install()}; take the other copy off LD_LIBRARY_PATH (or uninstall "
            "it), then restart the kernel."))
    copies = loaded_copies()
    if len(copies) > 1:
        raise CudnnVersionError(one_line(
            f"two cuDNN copies are loaded in this process, from {' and '.join(copies)} (mixing them fails with "
            "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH): keep one — uninstall the other or take its folder off "
            "LD_LIBRARY_PATH — and call H.load_cudnn() before `import cudnn`, then restart the kernel."))


def load_cudnn(*, need_gpu: bool = True):
    """Import and return the ``cudnn`` module with a working backend library: the course's one way to get it.

    ``need_gpu=False`` (code that only *constructs* graphs, such as the exercise checkers' unit tests): on a
    machine without a GPU the frontend is imported and returned unchecked (``pygraph``, tensors and ops work up
    to ``validate()``); with a GPU it is the full load below.

    Raises ``CudnnNotFoundError`` (what was searched, what to install) when no libcudnn can be loaded, its
    subclass ``CudnnLoadError`` when the chosen file is broken, ``CudnnVersionError`` when the backend is not a
    cuDNN 9 (``MIN_BACKEND``) or two copies are mixed (the cause of ``CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH``).
    Checks run once per process; the first also prints one line where torch, cuDNN or the frontend is not the
    stored run's version (``constraints.txt``). From then on warnings print as ``Category: message``
    (``compact_warnings``), so a notebook's stored outputs hold no machine's file paths.
    """
    global _verified
    compact_warnings()
    if not need_gpu:
        import torch

        if not (torch.cuda.is_available() and torch.cuda.device_count() > 0):
            return _import_frontend()
    cudnn = sys.modules.get("cudnn")
    if cudnn is None or cudnn is not _verified:
        if cudnn is None:
            _torch_loads_cudnn()
            found = libcudnn_candidates()
            if found:
                chosen = found[0]
                try:
                    ctypes.CDLL(chosen.path, mode=ctypes.RTLD_GLOBAL)
                except OSError as exc:
                    raise _broken(chosen.path, chosen.source, exc) from None
                # The frontend honours LD_LIBRARY_PATH first: point it at our choice.
                # (Without a libcudnn.so.9 there, its soname lookup finds the copy we just loaded.)
                folder = os.path.dirname(chosen.path)
                if os.path.exists(os.path.join(folder, "libcudnn.so.9")):
                    rest = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != folder]
                    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([folder, *rest])
        cudnn = _import_frontend()
        _check_backend(cudnn)
        _verified = cudnn
        _say_if_not_the_stored_run(cudnn)
    return cudnn


def stored_run_versions(path=None) -> dict[str, str]:
    """torch, cuDNN and frontend versions of the course's stored GPU run, read from ``constraints.txt`` in the
    checkout (``tools.execute`` writes it from the stamps): ``{"torch": "2.11.0", "cuDNN": "9.19.0", "frontend":
    "1.32.0"}``; empty where there is no such file (an installed copy of the course)."""
    from .paths import COURSE_ROOT

    path = COURSE_ROOT / "constraints.txt" if path is None else path
    names = {"torch": "torch", "nvidia-cudnn-cu": "cuDNN", "nvidia-cudnn-frontend": "frontend"}
    found = {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return {}
    for line in lines:
        pin = re.match(r"(torch|nvidia-cudnn-cu|nvidia-cudnn-frontend)\d*==([0-9.]+?)(?:\.\*)?\s*$", line.strip())
        if pin:
            found[names[pin[1]]] = pin[2]
    return found


def version_note(here: dict[str, str], stored: dict[str, str]) -> str | None:
    """One line when a version ``here`` is not the stored run's, naming both; None when all match (or nothing is
    known). torch is compared by its public version (Colab's 2.11.0+cu128 is the stored run's 2.11.0+cu130), cuDNN
    by major.minor.patch."""
    def public(name, version):
        version = str(version).split("+")[0]
        return ".".join(version.split(".")[:3]) if name == "cuDNN" else version

    differ = [name for name in ("torch", "cuDNN", "frontend")
              if name in here and name in stored and public(name, here[name]) != public(name, stored[name])]
    if not differ:
        return None
    return (f"Not the course's stored run: {' and '.join(f'{n} {here[n]}' for n in differ)} here, "
            f"{' and '.join(f'{n} {stored[n]}' for n in differ)} in the run that made the stored outputs "
            f"(constraints.txt): numbers, kernels and verdicts may differ from those shown.")


def _say_if_not_the_stored_run(cudnn) -> None:
    """Print one line, once per process (the setup cell's load), when torch, cuDNN or the frontend here is not the
    version of the course's stored run (``version_note``)."""
    import torch

    here = {"torch": torch.__version__, "cuDNN": version_string(int(cudnn.backend_version())),
            "frontend": getattr(cudnn, "__version__", "?")}
    note = version_note(here, stored_run_versions())
    if note:
        print(note)

