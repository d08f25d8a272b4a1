"""What the tests share: the GPU marker, grading that skips where the machine lacks a feature, a setup cell run
as Colab would run it."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers.device import has_gpu

requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU (none visible to torch)")


def graded(key, answer):
    """``X.exercise(key, answer)`` quietly; a test of that exercise is skipped, with the checker's reason,
    on a GPU (or COURSE_GPU profile) that cannot run it."""
    verdict = helpers.exercise(key, answer, quiet=True)
    if verdict.status == "skipped":
        pytest.skip(f"{key}: {verdict.message}")
    return verdict


def refused(key, answer) -> str:
    """The one line of the verdict ``graded`` gives ``answer``, which must be "failed"."""
    verdict = graded(key, answer)
    assert verdict.status == "failed", verdict
    return verdict.message


def wrong_answers(cases: list):
    """``pytest.mark.parametrize`` over ``(key, answer, message)`` rows, each case named after its answer."""
    return pytest.mark.parametrize("key, answer, message", cases, ids=[case[1].__name__ for case in cases])


def rejects_each(cases: list, how: str = "prefix"):
    """A GPU test of each ``(key, answer, message)`` in ``cases``: the answer fails, and its one line starts with
    ``message`` (``how="match"``: a regular expression matched at the start; ``"search"``: found anywhere)."""
    @requires_gpu
    @wrong_answers(cases)
    def test(key, answer, message):
        got = refused(key, answer)
        assert {"prefix": got.startswith, "match": lambda m: re.match(m, got),
                "search": lambda m: re.search(m, got)}[how](message), got

    return test


class StandInGraph:
    """Stands in for a ``cudnn.pygraph`` on the CPU, for ``graph_runs.recording(classes=(StandInGraph,))``: the
    public surface the recorder reads (``nodes``, ``get_outputs``, ``find_tensor``, ``execute``,
    ``execute_plan_at_index``), with ``fn`` (torch, on the bound buffers) doing the work a cuDNN plan would.

    ``inputs``/``outputs`` map names to UIDs; ``fn(**inputs)`` returns ``{output name: value}`` copied into the
    bound output buffers; ``kind`` is the one node's type ("SDPA", "MATMUL", ...), whose outputs are named as
    ``outputs``; the UIDs in ``pass_by_value`` are pass-by-value tensors."""

    def __init__(self, fn, inputs: dict, outputs: dict, *, kind: str = "MATMUL", pass_by_value=()):
        from types import SimpleNamespace

        self.fn, self.inputs, self.outputs, self.pass_by_value = fn, dict(inputs), dict(outputs), set(pass_by_value)
        self._tensors = {uid: SimpleNamespace(uid=uid, is_virtual=False, is_pass_by_value=uid in self.pass_by_value)
                         for uid in [*self.inputs.values(), *self.outputs.values()]}
        self.nodes = [SimpleNamespace(node_type=SimpleNamespace(name=kind),
                                      outputs={name: self._tensors[uid] for name, uid in self.outputs.items()})]

    def get_outputs(self):
        return [self._tensors[uid] for uid in self.outputs.values()]

    def find_tensor(self, uid):
        return self._tensors.get(uid)

    def execute(self, pack, workspace=None, handle=None):
        got = self.fn(**{name: pack[uid] for name, uid in self.inputs.items()})
        for name, uid in self.outputs.items():
            pack[uid].copy_(got[name])

    def execute_plan_at_index(self, pack, workspace=None, index=0, handle=None):
        self.execute(pack, workspace, handle)


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


class StandInBuilds(StandInGraph):
    """A ``StandInGraph`` with the methods ``provenance.tracing`` logs as builds, each defined on the class itself
    (the recorder wraps only those): ``validate``, ``build_plans`` (which builds plan 0) and ``build_plan_at_index``."""

    def execute(self, pack, workspace=None, handle=None):
        super().execute(pack, workspace, handle)

    def validate(self):
        pass

    def build_plans(self):
        self.build_plan_at_index(0)

    def build_plan_at_index(self, index):
        pass


class StandInCache:
    """Stands in for the frontend's kernel cache: ``deserialize`` is what ``provenance.tracing`` logs."""

    def deserialize(self, text):
        self.text = text
