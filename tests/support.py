"""What the tests share: the GPU marker, grading that skips where the machine lacks a feature, a setup cell run
as Colab would run it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helpers

requires_gpu = pytest.mark.skipif(not helpers.has_gpu(), reason="needs an NVIDIA GPU (none visible to torch)")


def graded(key, answer):
    """``X.exercise(key, answer)`` quietly; a test of that exercise is skipped, with the checker's reason,
    on a GPU (or COURSE_GPU profile) that cannot run it."""
    verdict = helpers.exercise(key, answer, quiet=True)
    if verdict.status == "skipped":
        pytest.skip(f"{key}: {verdict.message}")
    return verdict


def colab_setup_cell(setup: str, clone_from: str, course: Path, cwd: Path) -> tuple[str, str]:
    """Run a setup cell's source up to ``import helpers as H`` as Colab would (``google.colab`` imported, a fresh
    process): its clone of the course repository comes from ``clone_from`` (a file URL) into ``course`` instead of
    GitHub and /content; pip is recorded, not run. Returns (``H.__file__``, the folder pip would install)."""
    from tools import fork

    head = setup[: setup.index("import helpers as H")] + "import helpers as H\n"
    url = f"https://github.com/{fork.repository()}"
    assert url in head and 'pathlib.Path("/content/cudnn-frontend-course")' in head
    head = head.replace(url, clone_from).replace('"/content/cudnn-frontend-course"', repr(str(course)))
    driver = (
        "import subprocess, sys, types\n"
        "sys.modules['google.colab'] = types.ModuleType('google.colab')\n"
        "real_run, pip_calls = subprocess.run, []\n"
        "def run(cmd, *args, **kwargs):\n"
        "    if list(cmd[1:3]) == ['-m', 'pip']:\n"
        "        pip_calls.append(cmd)\n"
        "        return subprocess.CompletedProcess(cmd, 0)\n"
        "    return real_run(cmd, *args, **kwargs)\n"
        "subprocess.run = run\n"
        f"exec(compile({head!r}, 'setup-cell', 'exec'))\n"
        "print(H.__file__)\n"
        "print(pip_calls[0][-1] if pip_calls else 'no pip call')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND")}  # a fresh Colab process
    run = subprocess.run([sys.executable, "-c", driver], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    helpers_file, installed = run.stdout.strip().splitlines()[-2:]
    return helpers_file, installed
