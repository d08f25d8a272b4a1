"""Which torch build ``make`` installs into the venv, decided before anything is installed (stdlib only).

    python -m tools.torch_build --python .venv/bin/python --torch 'torch>=2.4' [--cpu] [--driver] [--cuda-torch]
                                [--cpu-index URL] [--wheelhouse DIR] [--constraint FILE] [--goal test]

PyPI's torch for Linux is the CUDA build: with its ``nvidia-*`` wheels a venv passed 5.4 GB on a CPU box and was
still growing. On Linux without an NVIDIA driver (``--driver`` not given) that build is installed only when asked
(``--cuda-torch``, make's ``CUDA_TORCH=1``). Otherwise, in this order:

1. a torch that satisfies ``--torch`` at hand, in the wheelhouse or pip's find-links, resolved by pip's dry-run report
   with ``--no-index`` (nothing is downloaded): a CPU build is installed from there, with one line saying so; a CUDA
   build stops;
2. torch's CPU index, probed once with a timeout of a few seconds: ``--torch`` from there, with one line saying so;
3. a stop, in one line that says what to give instead.

``--cpu`` (make's ``CPU=1``) asks for torch's CPU index first, on any machine; where it cannot be reached, one line
says so and a CPU wheel at hand is taken, or it stops. With ``--wheelhouse`` (make's offline install) only the
wheelhouse is looked at. Exit status 0 when torch is installed (or already there), 2 for a stop, pip's own on a
failed install. ``--constraint`` (make's stored-run pins, ``constraints.txt``, on a GPU machine) goes to that install.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_TIMEOUT_S = 3
# Measured on a 2-core CPU box: 5.4 GB one minute into an install of torch 2.14.1+cu130, still growing; a whole venv
# with torch 2.12.0's CUDA build, 5.7 GB.
CUDA_SIZE = "more than 5.4 GB"


@dataclass(frozen=True)
class Candidate:
    """The torch pip's dry-run picked: its version, whether it is a CUDA build, the wheel (a path, or a URL) and
    the folder it is in (for the messages)."""
    version: str
    cuda: bool
    wheel: str
    source: str


def is_cuda_build(version: str, requires: list[str]) -> bool:
    """A CUDA build: a ``+cuXXX`` local version, or ``nvidia-*`` requirements (PyPI's Linux wheels have no tag)."""
    local = version.partition("+")[2]
    return local.startswith("cu") or any(re.match(r"nvidia[-_]", r, re.I) for r in requires)


def at_hand(python: str, spec: str, wheelhouse: str | None) -> Candidate | None | str:
    """What pip would install for ``spec`` from local wheels only (``--no-index``: the wheelhouse and pip's
    find-links): a ``Candidate``; ``"installed"`` when the venv already has a torch that satisfies it; None if none."""
    links = ["--find-links", wheelhouse] if wheelhouse else []
    run = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", *links, "--quiet",
                          "--report", "-", spec], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        return None
    try:
        install = json.loads(run.stdout)["install"]
    except (ValueError, KeyError, TypeError):
        return None
    if not install:
        return "installed"
    item = next((i for i in install if i.get("metadata", {}).get("name", "").lower() == "torch"), install[0])
    meta, url = item.get("metadata", {}), item.get("download_info", {}).get("url", "")
    wheel = urllib.parse.unquote(urllib.parse.urlparse(url).path) if url.startswith("file:") else url
    return Candidate(meta.get("version", "?"), is_cuda_build(meta.get("version", ""), meta.get("requires_dist") or []),
                     wheel, os.path.dirname(wheel) if url.startswith("file:") else url)


def probe(index: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when torch's page on ``index`` answers within ``timeout`` seconds, else why not (one try, no retries)."""
    url = index.rstrip("/") + "/torch/"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None) if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context):
            return None
    except Exception as exc:   # URLError, a timeout, a refused connection, an HTTP error: all mean "not usable"
        return str(getattr(exc, "reason", None) or exc)


@dataclass(frozen=True)
class Choice:
    """``pip_args`` to install (None: nothing to install) and the line to print first (None: nothing to say);
    ``stop`` when nothing is installed and the line says why."""
    pip_args: list[str] | None
    line: str | None = None
    stop: bool = False


def choose(spec: str, *, python: str, cpu: bool, driver: bool, cuda_torch: bool, index: str = CPU_INDEX,
           wheelhouse: str | None = None, goal: str = "test", linux: bool = sys.platform.startswith("linux"),
           resolve=at_hand, reach=probe) -> Choice:
    """The rules of the module's docstring. ``resolve`` and ``reach`` are ``at_hand`` and ``probe`` (tests pass
    stand-ins)."""
    offline = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    guard = linux and not driver and not cuda_torch           # a CUDA build here would come by surprise
    local_where = f"{wheelhouse}/" if wheelhouse else "wheelhouse/ or pip's find-links"
    anyway = "or CUDA_TORCH=1 to take the CUDA build anyway"
    if not cpu and not guard:
        line = (f"No NVIDIA driver found: installing {spec}, the CUDA build ({CUDA_SIZE}), as CUDA_TORCH=1 asks"
                if linux and not driver else None)
        return Choice([*offline, spec], line)

    found = resolve(python, spec, wheelhouse)
    if found == "installed":
        return Choice(None)
    cpu_at_hand = isinstance(found, Candidate) and not found.cuda

    def take_local(why: str) -> Choice:       # that very wheel; its requirements from where the rest comes from
        return Choice([*offline, found.wheel], f"{why}: installing torch {found.version}, the CPU build, from "
                                               f"{found.source}")

    if cpu and not wheelhouse:                                # CPU=1: torch's CPU index first
        unreachable = reach(index)
        if unreachable is None:
            return Choice(["--index-url", index, spec])
        if cpu_at_hand:
            return take_local(f"torch's CPU index {index} is unreachable ({unreachable})")
        return Choice(None, f"torch's CPU index {index} is unreachable ({unreachable}), and no CPU build of {spec} "
                            f"is in {local_where}: run 'make {goal} CPU=1' where the index can be reached, or give "
                            f"TORCH=torch==X for a CPU wheel you have", stop=True)
    if isinstance(found, Candidate) and found.cuda:
        return Choice(None, f"{spec} resolves to torch {found.version}, a CUDA build ({CUDA_SIZE}), from "
                            f"{found.source}{', and this machine has no NVIDIA driver' if guard else ''}: give "
                            f"TORCH=torch==X for a CPU wheel, 'make {goal} CPU=1' for torch's CPU index, {anyway}",
                      stop=True)
    if cpu_at_hand:
        return take_local("No NVIDIA driver found" if guard else "CPU=1")
    if wheelhouse:                                            # the offline install looks nowhere else
        return Choice(None, f"no CPU build of {spec} is in {wheelhouse}/, and an install from a wheelhouse looks "
                            f"nowhere else: put a CPU wheel of torch there (torch's CPU index {index} has them)",
                      stop=True)
    unreachable = reach(index)
    if unreachable is None:
        return Choice(["--index-url", index, spec], f"No NVIDIA driver found: installing {spec}, the CPU build, from "
                                                    f"torch's CPU index {index} (CUDA_TORCH=1 takes the CUDA build)")
    return Choice(None, f"No NVIDIA driver found, and no CPU build of {spec} at hand (none in {local_where}; torch's "
                        f"CPU index {index} is unreachable: {unreachable}), and PyPI's is the CUDA build "
                        f"({CUDA_SIZE}): give TORCH=torch==X for a CPU wheel you have, 'make {goal} CPU=1' where "
                        f"the CPU index can be reached, {anyway}", stop=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the venv's python, whose pip resolves and installs")
    parser.add_argument("--torch", required=True, help="the torch requirement (make's TORCH)")
    parser.add_argument("--cpu", action="store_true", help="torch's CPU index first (make's CPU=1)")
    parser.add_argument("--driver", action="store_true", help="this machine has an NVIDIA driver")
    parser.add_argument("--cuda-torch", action="store_true", help="take the CUDA build without a driver")
    parser.add_argument("--cpu-index", default=CPU_INDEX, help="torch's CPU wheel index")
    parser.add_argument("--wheelhouse", help="install from this folder only (make's offline install)")
    parser.add_argument("--constraint", help="a pip constraints file for the install (the stored run's versions)")
    parser.add_argument("--goal", default="test", help="the make target, for the messages")
    args = parser.parse_args(argv)
    choice = choose(args.torch, python=args.python, cpu=args.cpu, driver=args.driver, cuda_torch=args.cuda_torch,
                    index=args.cpu_index, wheelhouse=args.wheelhouse, goal=args.goal)
    if choice.line:
        print(choice.line, file=sys.stderr if choice.stop else sys.stdout, flush=True)
    if choice.stop:
        return 2
    if choice.pip_args is None:
        return 0
    pins = ["-c", args.constraint] if args.constraint else []
    return subprocess.run([args.python, "-m", "pip", "install", "-q", *pins, *choice.pip_args]).returncode


if __name__ == "__main__":
    sys.exit(main())
