"""tools/torch_build.py: which torch the venv gets, each branch with a stand-in for pip and for the CPU index.

Nothing here touches the network: the index is a local server or a closed port, pip a script answering dry-runs."""
import http.server
import json
import socket
import sys
import threading
import time

import pytest

from tools import torch_build as TB

SPEC = "torch>=2.4"
INDEX = "http://cpu-index.invalid/whl/cpu"
CPU_WHEEL = TB.Candidate("2.13.0+cpu", False, "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl", "/opt/wheels")
CUDA_WHEEL = TB.Candidate("2.12.0", True, "/wh/torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl", "/wh")


class World:
    """What a choice may look at: the torch at hand (a Candidate, "installed" or None) and whether the index
    answers; it counts the looks, so a test can say what was never asked."""

    def __init__(self, at_hand=None, index_up=False):
        self.at_hand, self.index_up = at_hand, index_up
        self.resolved, self.probed = [], []

    def resolve(self, python, spec, wheelhouse):
        self.resolved.append((spec, wheelhouse))
        return self.at_hand

    def reach(self, index):
        self.probed.append(index)
        return None if self.index_up else "[Errno -2] Name or service not known"


def choose(world, spec=SPEC, *, cpu=False, driver=False, cuda_torch=False, wheelhouse=None, linux=True):
    return TB.choose(spec, python="venv/bin/python", cpu=cpu, driver=driver, cuda_torch=cuda_torch, index=INDEX,
                     wheelhouse=wheelhouse, linux=linux, resolve=world.resolve, reach=world.reach)


def one_line(choice):
    assert choice.line and "\n" not in choice.line
    return choice.line


# ------------------------------------------------------------------ no NVIDIA driver, nothing asked
def test_a_cpu_wheel_at_hand_is_taken_and_said_without_asking_the_index():
    world = World(CPU_WHEEL, index_up=True)
    choice = choose(world)
    assert choice.pip_args == [CPU_WHEEL.wheel] and not choice.stop     # that very wheel, deps as usual
    assert one_line(choice) == ("No NVIDIA driver found: installing torch 2.13.0+cpu, the CPU build, from "
                                "/opt/wheels")
    assert world.resolved == [(SPEC, None)] and world.probed == []


def test_without_a_wheel_at_hand_torchs_cpu_index_is_used_and_said():
    world = World(None, index_up=True)
    choice = choose(world)
    assert choice.pip_args == ["--index-url", INDEX, SPEC] and not choice.stop
    assert f"the CPU build, from torch's CPU index {INDEX}" in one_line(choice)
    assert world.probed == [INDEX]


def test_without_either_it_stops_in_one_line_saying_what_to_give():
    choice = choose(World(None, index_up=False))
    assert choice.stop and choice.pip_args is None
    line = one_line(choice)
    assert line.startswith("No NVIDIA driver found, and no CPU build of torch>=2.4 at hand")
    for advice in ("TORCH=torch==X", "'make test CPU=1'", "CUDA_TORCH=1", "more than 5.4 GB",
                   f"{INDEX} is unreachable: [Errno -2] Name or service not known"):
        assert advice in line


def test_a_torch_that_resolves_to_a_cuda_build_stops_before_it_is_installed():
    choice = choose(World(CUDA_WHEEL, index_up=True), "torch==2.12.0")
    assert choice.stop and choice.pip_args is None
    assert one_line(choice).startswith("torch==2.12.0 resolves to torch 2.12.0, a CUDA build (more than 5.4 GB), "
                                       "from /wh, and this machine has no NVIDIA driver")
    assert "CUDA_TORCH=1" in choice.line and "CPU=1" in choice.line


def test_a_torch_already_in_the_venv_is_kept():
    world = World("installed")
    assert choose(world) == TB.Choice(None) and world.probed == []


def test_cuda_torch_takes_the_cuda_build_and_says_so():
    world = World(CPU_WHEEL, index_up=True)
    choice = choose(world, cuda_torch=True)
    assert choice.pip_args == [SPEC] and "as CUDA_TORCH=1 asks" in one_line(choice)
    assert world.resolved == world.probed == []


# ------------------------------------------------------------------ a driver, another OS, CPU=1, a wheelhouse
@pytest.mark.parametrize("driver, linux", [(True, True), (False, False)])
def test_with_a_driver_or_off_linux_torch_is_installed_as_given(driver, linux):
    world = World(CUDA_WHEEL)
    assert choose(world, driver=driver, linux=linux) == TB.Choice([SPEC])
    assert world.resolved == world.probed == []


@pytest.mark.parametrize("driver", [False, True])
def test_cpu_1_takes_torchs_cpu_index_when_it_answers(driver):
    world = World(CPU_WHEEL, index_up=True)
    assert choose(world, cpu=True, driver=driver) == TB.Choice(["--index-url", INDEX, SPEC])


def test_cpu_1_offline_says_one_line_about_the_index_and_takes_the_wheel_at_hand():
    choice = choose(World(CPU_WHEEL, index_up=False), cpu=True)
    assert choice.pip_args == [CPU_WHEEL.wheel]
    assert one_line(choice) == (f"torch's CPU index {INDEX} is unreachable ([Errno -2] Name or service not known): "
                                f"installing torch 2.13.0+cpu, the CPU build, from /opt/wheels")


@pytest.mark.parametrize("at_hand", [None, CUDA_WHEEL])
def test_cpu_1_offline_without_a_cpu_wheel_stops_in_one_line(at_hand):
    choice = choose(World(at_hand, index_up=False), cpu=True)
    assert choice.stop and choice.pip_args is None
    assert one_line(choice).startswith(f"torch's CPU index {INDEX} is unreachable")
    assert "TORCH=torch==X" in choice.line


def test_a_wheelhouse_install_looks_nowhere_else():
    world = World(CPU_WHEEL, index_up=True)
    choice = choose(world, wheelhouse="wheelhouse")
    assert choice.pip_args == ["--no-index", "--find-links", "wheelhouse", CPU_WHEEL.wheel]
    assert world.resolved == [(SPEC, "wheelhouse")] and world.probed == []
    empty = choose(World(None, index_up=True), wheelhouse="wheelhouse", cpu=True)
    assert empty.stop and one_line(empty).startswith("no CPU build of torch>=2.4 is in wheelhouse/")
    cuda = choose(World(CUDA_WHEEL), wheelhouse="wheelhouse")
    assert cuda.stop and "a CUDA build" in one_line(cuda)


def test_a_wheelhouse_with_a_cuda_torch_installs_on_a_machine_with_a_driver():
    assert choose(World(CUDA_WHEEL), wheelhouse="wh", driver=True) == TB.Choice(["--no-index", "--find-links", "wh",
                                                                                SPEC])


# ------------------------------------------------------------------ what pip's dry-run report says
@pytest.mark.parametrize("version, requires, cuda", [
    ("2.13.0+cpu", ["filelock", "sympy>=1.13.3"], False),
    ("2.12.0", ['nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"', "filelock"], True),
    ("2.4.0+cu121", [], True),
    ("2.9.0", ["filelock"], False),                      # a build without CUDA requirements (macOS, a local build)
])
def test_a_cuda_build_is_told_by_its_version_tag_or_its_nvidia_requirements(version, requires, cuda):
    assert TB.is_cuda_build(version, requires) is cuda


def stand_in_pip(tmp_path, report=None, rc=0):
    """A python whose ``-m pip install --dry-run ... --report -`` prints ``report`` and exits ``rc``; it logs argv."""
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nimport sys\nopen({str(tmp_path / 'argv')!r}, 'a').write(repr(sys.argv) + '\\n')\n"
                      f"print({json.dumps(json.dumps(report)) if report is not None else repr('')})\nsys.exit({rc})\n")
    script.chmod(0o755)
    return str(script)


def report(version, requires, url):
    return {"version": "1", "install": [{"metadata": {"name": "torch", "version": version, "requires_dist": requires},
                                         "download_info": {"url": url}}]}


def test_at_hand_reads_pips_dry_run_report_with_no_index(tmp_path):
    url = "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    python = stand_in_pip(tmp_path, report("2.13.0+cpu", ["filelock"], url))
    found = TB.at_hand(python, "torch==2.13.0", "wheelhouse")
    assert found == TB.Candidate("2.13.0+cpu", False, "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                                 "/opt/wheels")
    argv = eval((tmp_path / "argv").read_text())
    assert argv[1:5] == ["-m", "pip", "install", "--dry-run"]
    assert {"--no-deps", "--no-index", "--quiet"} <= set(argv) and argv[argv.index("--report") + 1] == "-"
    assert argv[argv.index("--find-links") + 1] == "wheelhouse" and argv[-1] == "torch==2.13.0"


def test_at_hand_tells_an_installed_torch_from_none(tmp_path):
    assert TB.at_hand(stand_in_pip(tmp_path, {"version": "1", "install": []}), SPEC, None) == "installed"
    assert TB.at_hand(stand_in_pip(tmp_path, None, rc=1), SPEC, None) is None        # no distribution found
    assert TB.at_hand(stand_in_pip(tmp_path, None, rc=0), SPEC, None) is None        # not a report


# ------------------------------------------------------------------ the index probe: one try, a few seconds
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_probe_answers_for_an_index_that_serves_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<a href='torch-2.13.0+cpu.whl'>torch</a>")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert TB.probe(f"http://127.0.0.1:{server.server_port}") is None
        assert TB.probe(f"http://127.0.0.1:{server.server_port}/elsewhere") is not None    # 404: no torch there
    finally:
        server.shutdown()


def test_the_probe_of_an_index_that_does_not_answer_fails_fast_in_one_line():
    t0 = time.perf_counter()
    reason = TB.probe(f"http://127.0.0.1:{free_port()}/whl/cpu")                         # nothing listens
    assert reason and "\n" not in reason and time.perf_counter() - t0 < 2
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()                                                                       # accepts, never answers
    try:
        t0 = time.perf_counter()
        assert "timed out" in TB.probe(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        assert time.perf_counter() - t0 < 2
    finally:
        silent.close()
    assert TB.PROBE_TIMEOUT_S <= 5


def test_the_command_prints_the_stop_line_on_stderr_and_exits_2_installing_nothing(tmp_path, capsys):
    python = stand_in_pip(tmp_path, None, rc=1)
    assert TB.main(["--python", python, "--torch", "torch==2.12.0", "--cpu-index",
                    f"http://127.0.0.1:{free_port()}", "--goal", "run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "'make run CPU=1'" in err
    calls = (tmp_path / "argv").read_text().splitlines()
    assert len(calls) == 1 and "--dry-run" in calls[0]                                  # resolved, never installed
