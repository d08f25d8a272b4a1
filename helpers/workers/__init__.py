"""Workers: programs the notebooks start in a fresh process, so that a measurement sees what a new process
sees (nothing built, nothing cached, nothing compiled), and ``run_worker``, the one way notebooks, checkers and
tests launch them (``python -m helpers.workers.<name>``).

tiny_graph    notebook 01: the smallest graph, built with the frontend's logging switched on from the start
conv_compile  notebook 02: torch.compile of conv → bias → ReLU with cudnn.benchmark off or on, timed on the GPU
plan_worker   notebook 06: cold-build or deserialize cuDNN execution plans
cache_worker  notebook 07: the first dynamic-shape build (empty kernel cache or one loaded from disk), and each MLP
              build mode (static, heuristics per shape, pinned) in a process of its own
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ..errors import CourseError, one_line
from ..paths import COURSE_ROOT, tidy_paths

RESULT_PREFIX = "RESULT "                                  # a worker's machine-readable line: RESULT {json}
STARTED: set[str] = set()   # the workers this process started (tools.execute stamps a notebook with their files)


class WorkerError(CourseError):
    """A worker exited with an error (or timed out); the message ends with its last lines of stderr."""


@dataclass
class WorkerRun:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float            # from launch to exit, as the caller saw it
    launched_at: float       # time.time() at launch (a worker can report its own clock against it)
    result: dict | None = field(default=None)   # the last ``RESULT {json}`` line's object, if it printed one


def run_worker(name: str, *args, env: dict | None = None, timeout: float = 300, cwd=None,
               check: bool = True) -> WorkerRun:
    """``python -m helpers.workers.<name> ARGS`` in a fresh process, with this ``helpers`` importable
    there (its parent folder first on ``PYTHONPATH``); ``env`` adds or overrides environment variables.

    With ``check`` a non-zero exit, a timeout or a missing worker raises ``WorkerError`` — one line, then the
    last lines of the worker's stderr with machine paths tidied."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"worker name must be a module name such as 'plan_worker', got {name!r}")
    variables = dict(os.environ, **{k: str(v) for k, v in (env or {}).items()})
    variables["PYTHONPATH"] = os.pathsep.join(p for p in (str(COURSE_ROOT), variables.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", f"helpers.workers.{name}", *map(str, args)]
    STARTED.add(name)
    launched_at, t0 = time.time(), time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=variables, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise WorkerError(f"worker {name} did not finish within {timeout:.0f} s") from None
    wall_s = time.perf_counter() - t0
    results = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    result = json.loads(results[-1][len(RESULT_PREFIX):]) if results else None
    if check and proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise WorkerError(one_line(f"worker {name} failed (exit {proc.returncode})") + "\n" + tidy_paths(tail))
    return WorkerRun(proc.returncode, proc.stdout, proc.stderr, wall_s, launched_at, result)
