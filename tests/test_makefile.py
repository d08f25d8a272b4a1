"""The Makefile's install paths, read from ``make -n`` (or run against a fake venv whose python stands in for pip):
nothing is downloaded, and torch's CPU index is never asked (a closed local port stands in for it).

What a newcomer meets first: which torch a machine without an NVIDIA driver gets (the CPU build, or a stop in one
line), the CPU and lean installs, the settings a venv remembers, the wheelhouse without torch, ``make lab`` as root.
"""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tools import torch_build as TB

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="needs make")

CHOICE = " -m tools.torch_build "
# Variables a caller's environment could hand to make: a test names what it means and nothing else.
MAKE_VARS = ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL", "TORCH", "CPU", "LEAN", "SYSTEM_TORCH",
             "NVIDIA_DRIVER", "VENV", "WHEELHOUSE", "PYTEST_ARGS", "USER_ID", "PYTHON", "OUT", "BRANCH", "REPO",
             "CPU_INDEX", "CUDA_TORCH", "LATEST")


def closed_port_url() -> str:
    """A URL nothing answers at (a port just freed): the stand-in for an unreachable index."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/whl/cpu"


NO_INDEX = closed_port_url()


def make(*args, path=None):
    """Run make in the checkout with only the given variables (and CPU_INDEX at a closed port, unless given);
    returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARS}
    if path is not None:
        env["PATH"] = path
    if not any(a.startswith("CPU_INDEX=") for a in args):
        args = (*args, f"CPU_INDEX={NO_INDEX}")
    return subprocess.run([MAKE, "--no-print-directory", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def lines(out: str) -> list[str]:
    """make -n output, one command a line (continuation lines joined)."""
    return [ln.strip() for ln in out.replace("\\\n", " ").splitlines() if ln.strip()]


def req_name(word: str) -> str:
    return re.match(r"[A-Za-z0-9._-]*", word).group(0).lower()


def requirement_names(command: str) -> set[str]:
    """Names of the requirements a pip install/download command asks for, including those of its -r files."""
    args = shlex.split(command)
    names, i = set(), args.index("pip") + 2
    while i < len(args):
        a = args[i]
        if a in ("-r", "--requirement"):
            text = (ROOT / args[i + 1]).read_text()
            names |= {req_name(ln.split("#")[0].strip()) for ln in text.splitlines() if ln.split("#")[0].strip()}
            i += 2
        elif a in ("-d", "--python-version", "--platform", "--index-url", "--find-links", "-c", "--constraint"):
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            names.add(req_name(a))
            i += 1
    return names - {""}


@pytest.fixture
def empty_wheelhouse(tmp_path):
    """A wheelhouse with no wheels, so a developer's own wheelhouse/ cannot switch the install offline."""
    (tmp_path / "wh").mkdir()
    return f"WHEELHOUSE={tmp_path / 'wh'}"


CPU_WHEEL = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_WHEEL = "/opt/wheels/torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def dry_run_report(wheel: str) -> dict:
    """pip's ``--dry-run --report`` for torch from ``wheel`` (a CUDA build requires nvidia-* wheels)."""
    version = Path(wheel).name.split("-")[1]
    requires = ["filelock"] + ([] if "+cpu" in version else ['nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"'])
    return {"version": "1", "install": [{"metadata": {"name": "torch", "version": version, "requires_dist": requires},
                                         "download_info": {"url": "file://" + wheel.replace("+", "%2B")}}]}


def fake_venv(root: Path, at_hand: str | None = CPU_WHEEL, **settings) -> Path:
    """A venv whose python (and jupyter) only writes down that it ran, with a stamp recording ``settings``. Its
    python stands in for pip: a dry-run finds torch in ``at_hand`` (a wheel path; None: no torch at hand)."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    answer = json.dumps(dry_run_report(at_hand)) if at_hand else None
    for tool in ("python", "jupyter"):
        script = venv / "bin" / tool
        script.write_text(f"#!{sys.executable}\nimport sys\n"
                          f"open({str(root / 'ran')!r}, 'a').write(' '.join(sys.argv) + '\\n')\n"
                          f"if '--dry-run' in sys.argv:\n"
                          f"    sys.exit(print({answer!r}) if {answer is not None} else 1)\n")
        script.chmod(0o755)
    if settings:
        record = {"TORCH": "torch==2.13.0", "SYSTEM_TORCH": "0", "CPU": "0", "LEAN": "0", "LATEST": "0", **settings}
        (venv / ".installed").write_text("".join(f"{k}={v}\n" for k, v in record.items()))
    return venv


# ------------------------------------------------------------------ wheelhouse
def wheelhouse_downloads(*args) -> list[str]:
    run = make("-n", "wheelhouse", *args)
    assert run.returncode == 0, run.stderr
    downloads = [ln for ln in lines(run.stdout) if " pip download " in ln]
    assert downloads, run.stdout
    return downloads


def test_wheelhouse_with_system_torch_holds_no_torch_and_no_cuda_wheel(empty_wheelhouse):
    (download,) = wheelhouse_downloads("SYSTEM_TORCH=1", empty_wheelhouse)
    names = requirement_names(download)
    assert "torch" not in names
    assert "-r requirements.txt" not in download          # it names torch
    assert {n for n in names if n.startswith("nvidia-")} == {"nvidia-cudnn-frontend"}
    assert {"numpy", "jupyterlab", "pytest", "nbval"} <= names


def test_wheelhouse_by_default_holds_torch(empty_wheelhouse):
    (download,) = wheelhouse_downloads("SYSTEM_TORCH=0", empty_wheelhouse)
    assert {"torch", "nvidia-cudnn-frontend", "numpy", "pytest"} <= requirement_names(download)
    assert '"torch>=2.4"' in download
    (pinned,) = wheelhouse_downloads("SYSTEM_TORCH=0", "TORCH=torch==2.13.0", empty_wheelhouse)
    assert '"torch==2.13.0"' in pinned


def test_lean_wheelhouse_takes_the_frontend_without_its_dependencies(empty_wheelhouse):
    frontend, rest = wheelhouse_downloads("SYSTEM_TORCH=1", "LEAN=1", empty_wheelhouse)
    assert "--no-deps" in shlex.split(frontend) and requirement_names(frontend) == {"nvidia-cudnn-frontend"}
    assert "--no-deps" not in shlex.split(rest)
    assert "nvidia-cudnn-frontend" not in requirement_names(rest) and "torch" not in requirement_names(rest)


# ------------------------------------------------------------------ which torch: decided before anything is installed
def install_lines(tmp_path, *args) -> list[str]:
    run = make("-n", "test", f"VENV={tmp_path / 'v'}", *args)
    assert run.returncode == 0, run.stderr
    return lines(run.stdout)


def torch_choice(out: list[str]) -> list[str]:
    """The arguments of the one command that installs torch (tools/torch_build.py), as make -n prints it."""
    (line,) = [ln for ln in out if CHOICE in ln]
    return shlex.split(line.split(" || ")[0])


def test_torch_is_chosen_before_anything_is_installed_and_installed_nowhere_else(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", empty_wheelhouse)
    choice = next(i for i, ln in enumerate(out) if CHOICE in ln)
    assert choice < min(i for i, ln in enumerate(out) if " pip install " in ln)
    assert not any("torch" in requirement_names(ln) for ln in out if " pip install " in ln)
    args = torch_choice(out)
    assert args[args.index("--torch") + 1] == "torch>=2.4" and args[args.index("--python") + 1] == f"{tmp_path}/v/bin/python"
    assert not {"--driver", "--cpu", "--cuda-torch", "--wheelhouse"} & set(args)


@pytest.mark.parametrize("setting, flag", [("NVIDIA_DRIVER=1", "--driver"), ("CPU=1", "--cpu"),
                                           ("CUDA_TORCH=1", "--cuda-torch")])
def test_each_setting_reaches_the_torch_choice(tmp_path, empty_wheelhouse, setting, flag):
    defaults = dict(a.split("=") for a in ("NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", setting))
    args = torch_choice(install_lines(tmp_path, *(f"{k}={v}" for k, v in defaults.items()), empty_wheelhouse))
    assert [a for a in args if a in ("--driver", "--cpu", "--cuda-torch")] == [flag]


def test_system_torch_installs_no_torch(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "NVIDIA_DRIVER=1", "SYSTEM_TORCH=1", empty_wheelhouse)
    assert not any(CHOICE in ln for ln in out) and any("SYSTEM_TORCH=1" in ln for ln in out)


def test_driver_is_detected_from_nvidia_smi_on_path(tmp_path, empty_wheelhouse):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (fake / "nvidia-smi").chmod(0o755)
    args = ("-n", "test", f"VENV={tmp_path / 'v'}", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert "--driver" in torch_choice(lines(make(*args, path=f"{fake}:/usr/bin:/bin").stdout))
    if Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has an NVIDIA driver")
    assert "--driver" not in torch_choice(lines(make(*args, path="/usr/bin:/bin").stdout))


def test_the_cpu_index_is_torchs_unless_another_is_given(tmp_path, empty_wheelhouse):
    assert TB.CPU_INDEX == "https://download.pytorch.org/whl/cpu"
    given = torch_choice(install_lines(tmp_path, "CPU=1", "SYSTEM_TORCH=0", "CPU_INDEX=http://mirror/cpu", empty_wheelhouse))
    assert given[given.index("--cpu-index") + 1] == "http://mirror/cpu"
    run = subprocess.run([MAKE, "-n", "test", f"VENV={tmp_path / 'v'}", "CPU=1", "SYSTEM_TORCH=0", empty_wheelhouse],
                         cwd=ROOT, env={k: v for k, v in os.environ.items() if k not in MAKE_VARS},
                         capture_output=True, text=True, timeout=60)
    assert "--cpu-index" not in torch_choice(lines(run.stdout))                 # the tool's own default, one home


def test_cpu_build_comes_from_torchs_cpu_index_for_torch_only(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "CPU=1", "SYSTEM_TORCH=0", "NVIDIA_DRIVER=0", empty_wheelhouse)
    assert "--cpu" in torch_choice(out)
    assert not any("--index-url" in ln or "http" in ln for ln in out if " pip install " in ln)


def test_ci_path_pinned_torch_names_no_index(tmp_path, empty_wheelhouse):
    """.ci/run: make test TORCH=torch==2.13.0 on a fresh clone: the torch choice gets the pin, the rest installs from
    the configured index only (the choice takes the CPU wheel at hand without asking an index: test_torch_build)."""
    out = install_lines(tmp_path, "TORCH=torch==2.13.0", "SYSTEM_TORCH=0", "NVIDIA_DRIVER=0", empty_wheelhouse)
    args = torch_choice(out)
    assert args[args.index("--torch") + 1] == "torch==2.13.0" and "--cpu" not in args
    pips = [ln for ln in out if " pip install " in ln]
    assert not any("--index-url" in ln or "http" in ln for ln in pips)
    assert any('-e ".[test]"' in ln for ln in pips)


def test_a_wheelhouse_is_where_the_torch_choice_looks(tmp_path):
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "numpy-2.0.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    args = torch_choice(install_lines(tmp_path, "SYSTEM_TORCH=0", f"WHEELHOUSE={tmp_path / 'wh'}"))
    assert args[args.index("--wheelhouse") + 1] == str(tmp_path / "wh")


# ------------------------------------------------------------------ the stored run's versions on a GPU machine
PINS = "constraints.txt"


def pinned_installs(out: list[str]) -> tuple[list[str], list[str]]:
    """(installs that take the stored run's versions, installs that do not), the torch choice among them."""
    installs = [ln for ln in out if " pip install " in ln or CHOICE in ln]
    taking = [ln for ln in installs if f"-c {PINS}" in ln or f"--constraint {PINS}" in ln]
    return taking, [ln for ln in installs if ln not in taking]


@pytest.mark.parametrize("setting", ["NVIDIA_DRIVER=1", "CUDA_TORCH=1"])
@pytest.mark.parametrize("lean", ["LEAN=0", "LEAN=1"])
def test_a_gpu_install_takes_the_stored_runs_versions_and_says_so(tmp_path, empty_wheelhouse, setting, lean):
    out = install_lines(tmp_path, "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", setting, lean, empty_wheelhouse)
    taking, not_taking = pinned_installs(out)
    assert any(CHOICE in ln for ln in taking), "torch itself is installed with the pins"
    assert all(" -e . " in ln + " " and "--no-deps" in ln for ln in not_taking), not_taking   # the course, alone
    pins = [ln for ln in (ROOT / PINS).read_text().splitlines() if not ln.startswith("#")]
    said = [ln for ln in out if "stored run's versions" in ln]
    assert len(said) == 1 and all(p in said[0] for p in pins) and "LATEST=1 takes the newest" in said[0]


@pytest.mark.parametrize("setting", ["LATEST=1", "SYSTEM_TORCH=1", "CPU=1", "TORCH=torch==2.12.0", "NVIDIA_DRIVER=0"])
def test_the_newest_a_kept_torch_a_cpu_build_or_a_callers_torch_take_no_pins(tmp_path, empty_wheelhouse, setting):
    given = dict(a.split("=", 1) for a in ("NVIDIA_DRIVER=1", "SYSTEM_TORCH=0", setting))
    out = install_lines(tmp_path, *(f"{k}={v}" for k, v in given.items()), empty_wheelhouse)
    taking, _ = pinned_installs(out)
    assert taking == [] and not any("stored run's versions" in ln for ln in out)


def test_the_wheelhouse_for_a_gpu_runner_takes_the_pins_unless_latest_or_a_torch_is_given(empty_wheelhouse):
    (download,) = wheelhouse_downloads("SYSTEM_TORCH=0", empty_wheelhouse)
    assert f"-c {PINS}" in download
    for other in ("LATEST=1", "TORCH=torch==2.12.0"):
        (download,) = wheelhouse_downloads("SYSTEM_TORCH=0", other, empty_wheelhouse)
        assert f"-c {PINS}" not in download


def test_the_pins_reach_the_torch_install(tmp_path, empty_wheelhouse):
    venv = fake_venv(tmp_path)
    run = make("test", f"VENV={venv}", "NVIDIA_DRIVER=1", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert run.returncode == 0, run.stderr
    calls = ran(tmp_path)
    assert calls[0] == f"{venv}/bin/python -m pip install -q -c {PINS} torch>=2.4"
    assert calls[1] == f"{venv}/bin/python -m pip install -q -c {PINS} -e .[test]"


# --- the same, run: a fake venv's python stands in for pip
def ran(root: Path) -> list[str]:
    return (root / "ran").read_text().splitlines() if (root / "ran").exists() else []


def test_plain_make_test_on_a_driverless_box_takes_the_cpu_wheel_at_hand_and_says_so(tmp_path, empty_wheelhouse):
    venv = fake_venv(tmp_path, at_hand=CPU_WHEEL)
    run = make("test", f"VENV={venv}", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout)[0] == "No NVIDIA driver found: installing torch 2.13.0+cpu, the CPU build, from /opt/wheels"
    calls = ran(tmp_path)
    assert "--dry-run" in calls[0] and calls[1] == f"{venv}/bin/python -m pip install -q {CPU_WHEEL}"
    assert not any("--dry-run" in c or CPU_WHEEL in c for c in calls[2:])
    assert calls[-1].endswith("-m pytest") and (venv / ".installed").exists()


@pytest.mark.parametrize("target", ["test", "lab"])   # run stops earlier without a driver (below)
@pytest.mark.parametrize("torch, at_hand, says", [
    ("torch>=2.4", None, "No NVIDIA driver found, and no CPU build of torch>=2.4 at hand"),
    ("torch==2.12.0", CUDA_WHEEL, "torch==2.12.0 resolves to torch 2.12.0, a CUDA build"),
])
def test_without_a_cpu_build_at_hand_make_stops_in_one_line_before_installing(tmp_path, empty_wheelhouse, target,
                                                                              torch, at_hand, says):
    venv = fake_venv(tmp_path, at_hand=at_hand)
    run = make(target, f"VENV={venv}", f"TORCH={torch}", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert run.returncode != 0 and run.stdout == ""
    message, framing = run.stderr.strip().splitlines()                 # our line, then make's "*** [...] Error 2"
    assert message.startswith(says) and f"'make {target} CPU=1'" in message and "CUDA_TORCH=1" in message
    assert framing.startswith("make: *** [") and framing.endswith("Error 2")
    assert [c for c in ran(tmp_path) if "--dry-run" not in c] == []    # resolved, nothing installed or run
    assert not (venv / ".installed").exists()


def test_cpu_1_offline_says_one_line_about_the_index_and_takes_the_wheel_at_hand(tmp_path, empty_wheelhouse):
    venv = fake_venv(tmp_path, at_hand=CPU_WHEEL)
    run = make("test", f"VENV={venv}", "CPU=1", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert run.returncode == 0, run.stderr
    about_index = [ln for ln in (run.stdout + run.stderr).splitlines() if "index" in ln.lower()]
    (line,) = about_index
    assert line.startswith(f"torch's CPU index {NO_INDEX} is unreachable (") and "Connection refused" in line
    assert line.endswith("): installing torch 2.13.0+cpu, the CPU build, from /opt/wheels")
    assert f"{venv}/bin/python -m pip install -q {CPU_WHEEL}" in ran(tmp_path)


def test_a_venv_this_call_created_is_removed_when_the_choice_stops_and_a_users_folder_is_kept(tmp_path):
    """Real venvs and a real pip (offline: a dry-run with --no-index, for a torch no wheel satisfies)."""
    fresh = tmp_path / "fresh"
    stop = make("test", f"VENV={fresh}", "TORCH=torch==1.0.0", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0",
                f"WHEELHOUSE={tmp_path / 'none'}")
    assert stop.returncode != 0 and "no CPU build of torch==1.0.0" in stop.stderr
    assert not fresh.exists(), "the venv made for this call holds nothing: it is gone again"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    stop = make("test", f"VENV={mine}", "TORCH=torch==1.0.0", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0",
                f"WHEELHOUSE={tmp_path / 'none'}")
    assert stop.returncode != 0 and (mine / "notes.txt").read_text() == "kept"


def test_lean_install_takes_the_frontend_alone(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "LEAN=1", "SYSTEM_TORCH=0", "TORCH=torch==2.13.0", empty_wheelhouse)
    pips = [ln for ln in out if " pip install " in ln]
    frontend = [ln for ln in pips if "nvidia-cudnn-frontend" in requirement_names(ln)]
    assert len(frontend) == 1 and "--no-deps" in frontend[0].split()
    editable = [ln for ln in pips if " -e " in ln]
    assert len(editable) == 1 and "--no-deps" in editable[0].split() and "[test]" not in editable[0]
    rest = set().union(*(requirement_names(ln) for ln in pips if ln not in frontend + editable))
    assert {"numpy", "jupyterlab", "pytest", "nbval", "cuda-bindings"} <= rest
    assert not {"nvidia-cutlass-dsl", "apache-tvm-ffi", "nvidia-cudnn-frontend"} & rest


# ------------------------------------------------------------------ what the venv remembers
def test_the_stamp_records_the_settings_and_a_different_one_stops(tmp_path, empty_wheelhouse):
    venv = fake_venv(tmp_path)
    # a real run of the install step, with a python that only writes down what it was asked
    run = make(str(venv / ".installed"), f"VENV={venv}", "TORCH=torch==2.13.0", "SYSTEM_TORCH=0", "LEAN=1",
               "NVIDIA_DRIVER=0", empty_wheelhouse)
    assert run.returncode == 0, run.stderr
    stamp = dict(ln.split("=", 1) for ln in (venv / ".installed").read_text().splitlines())
    assert stamp == {"TORCH": "torch==2.13.0", "SYSTEM_TORCH": "0", "CPU": "0", "LEAN": "1", "LATEST": "0"}
    (tmp_path / "ran").unlink()

    for target in ("test", "run", "lab"):
        stop = make(target, f"VENV={venv}", "TORCH=torch>=2.4", empty_wheelhouse)
        assert stop.returncode != 0 and not (tmp_path / "ran").exists()     # stopped before anything ran
        (message,) = stop.stderr.strip().splitlines()
        assert "TORCH=torch==2.13.0" in message and "TORCH=torch>=2.4" in message and "make clean" in message
        assert not stop.stdout.strip()


@pytest.mark.parametrize("setting", ["LEAN=0", "CPU=1", "SYSTEM_TORCH=1", "LATEST=1"])
def test_any_recorded_setting_given_differently_stops(tmp_path, setting):
    venv = fake_venv(tmp_path, LEAN="1")
    stop = make("-n", "test", f"VENV={venv}", setting)
    assert stop.returncode != 0 and "make clean" in stop.stderr and setting in stop.stderr
    assert len(stop.stderr.strip().splitlines()) == 1


def test_settings_not_given_are_taken_from_the_stamp(tmp_path, empty_wheelhouse):
    venv = fake_venv(tmp_path, LEAN="1", CPU="1")
    same = make("-n", "test", f"VENV={venv}", "TORCH=torch==2.13.0", "LEAN=1", empty_wheelhouse)
    assert same.returncode == 0 and "-m pytest" in same.stdout
    rebuilt = make("-n", "-B", "test", f"VENV={venv}", "NVIDIA_DRIVER=0", empty_wheelhouse)
    assert rebuilt.returncode == 0, rebuilt.stderr
    out = lines(rebuilt.stdout)
    args = torch_choice(out)
    assert args[args.index("--torch") + 1] == "torch==2.13.0" and "--cpu" in args   # the recorded torch, CPU index
    assert any("--no-deps" in ln and "nvidia-cudnn-frontend" in ln for ln in out)   # still lean


def test_a_fresh_venv_or_make_clean_first_does_not_stop(tmp_path):
    assert make("-n", "test", f"VENV={tmp_path / 'new'}", "TORCH=torch>=2.4", "SYSTEM_TORCH=0").returncode == 0
    venv = fake_venv(tmp_path)
    run = make("-n", "clean", "test", f"VENV={venv}", "TORCH=torch>=2.4", "SYSTEM_TORCH=0")
    assert run.returncode == 0 and f"rm -rf {venv}" in run.stdout
    # targets that do not care about torch's build use the venv as it is
    assert make("-n", "student", f"VENV={venv}", "TORCH=torch>=2.4").returncode == 0


# ------------------------------------------------------------------ the hand-out
@pytest.mark.parametrize("args, branch", [((), "student"), (("BRANCH=workshop",), "workshop")])
def test_handout_branch_writes_the_branch_and_student_points_its_copies_at_it(tmp_path, args, branch):
    venv = fake_venv(tmp_path, SYSTEM_TORCH="0")
    run = make("-n", "handout-branch", f"VENV={venv}", *args)
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout) == [f"{venv}/bin/python -m tools.student --branch {branch}"]
    run = make("-n", "student", f"VENV={venv}", "OUT=/tmp/handout-x", *args)
    assert lines(run.stdout) == [f"{venv}/bin/python -m tools.student /tmp/handout-x --branch {branch}"]


# ------------------------------------------------------------------ lab, test arguments, the workflow
@pytest.mark.parametrize("uid, allow", [("0", True), ("1000", False)])
def test_lab_allows_root(tmp_path, uid, allow):
    venv = fake_venv(tmp_path, SYSTEM_TORCH="0")
    run = make("-n", "lab", f"VENV={venv}", f"USER_ID={uid}")
    (line,) = [ln for ln in lines(run.stdout) if "jupyter lab" in ln]
    assert ("--allow-root" in line.split()) == allow


def test_lab_detects_root_by_itself(tmp_path):
    venv = fake_venv(tmp_path, SYSTEM_TORCH="0")
    (line,) = [ln for ln in lines(make("-n", "lab", f"VENV={venv}").stdout) if "jupyter lab" in ln]
    assert ("--allow-root" in line.split()) == (os.getuid() == 0)


def test_pytest_args_reach_pytest_and_the_workflow_uploads_what_they_write(tmp_path):
    venv = fake_venv(tmp_path, SYSTEM_TORCH="0")
    run = make("-n", "test", f"VENV={venv}", "PYTEST_ARGS=--junitxml=test-results/junit.xml -x")
    assert run.returncode == 0
    assert f"{venv}/bin/python -m pytest --junitxml=test-results/junit.xml -x" in lines(run.stdout)

    workflow = (ROOT / ".github/workflows/gpu-tests.yml").read_text()
    report = re.search(r"--junitxml=([^\s\"']+)", workflow).group(1)
    uploaded = re.findall(r"^\s*path:\s*(\S+)", workflow, re.M)
    assert any(report.startswith(p.rstrip("/") + "/") or report == p for p in uploaded), (report, uploaded)
    assert not any(p.rstrip("/") == "results" for p in uploaded)   # a test run never writes results/


def test_make_run_without_a_driver_says_so_in_one_line_before_installing_anything(tmp_path):
    venv = tmp_path / "venv"
    stop = make("run", f"VENV={venv}", "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0")
    assert stop.returncode != 0 and stop.stdout == ""
    (line,) = stop.stderr.strip().splitlines()
    assert "No NVIDIA driver found" in line and "'make run'" in line and "'make test'" in line, line
    assert line.endswith("Stop.") and not venv.exists()   # make's framing; no venv, nothing installed
    assert "-m tools.execute" in make("-n", "run", f"VENV={fake_venv(tmp_path, SYSTEM_TORCH='0')}",
                                      "NVIDIA_DRIVER=1").stdout


# ------------------------------------------------------------------ what the messages point at
def readme_headings() -> set[str]:
    return {ln.lstrip("#").strip() for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("#")}


def test_readme_headings_named_by_the_no_gpu_message_exist():
    source = (ROOT / "tools" / "execute.py").read_text()
    named = re.findall(r"see README, '([^']+)'", source)
    assert named, "tools/execute.py's no-GPU message names no README heading"
    assert set(named) <= readme_headings(), set(named) - readme_headings()
