"""The Makefile's install paths, read from ``make -n`` (or run against a fake venv): nothing is downloaded.

What a newcomer meets first: the notice on a machine without an NVIDIA driver, the CPU and lean installs,
the settings a venv remembers, the wheelhouse without torch, ``make lab`` as root.
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="needs make")

NOTICE = "No NVIDIA driver found"
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
# Variables a caller's environment could hand to make: a test names what it means and nothing else.
MAKE_VARS = ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL", "TORCH", "CPU", "LEAN", "SYSTEM_TORCH",
             "NVIDIA_DRIVER", "VENV", "WHEELHOUSE", "PYTEST_ARGS", "USER_ID", "PYTHON", "OUT", "BRANCH", "REPO")


def make(*args, path=None):
    """Run make in the checkout with only the given variables; returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARS}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([MAKE, "--no-print-directory", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


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
        elif a in ("-d", "--python-version", "--platform", "--index-url", "--find-links"):
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


def fake_venv(root: Path, **settings) -> Path:
    """A venv whose python only writes down that it ran, with a stamp recording ``settings``."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    for tool in ("python", "jupyter"):
        script = venv / "bin" / tool
        script.write_text(f'#!/bin/sh\necho "$0 $*" >> {root}/ran\nexit 0\n')
        script.chmod(0o755)
    if settings:
        record = {"TORCH": "torch==2.13.0", "SYSTEM_TORCH": "0", "CPU": "0", "LEAN": "0", **settings}
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


# ------------------------------------------------------------------ the no-driver notice
def install_lines(tmp_path, *args) -> list[str]:
    run = make("-n", "test", f"VENV={tmp_path / 'v'}", *args)
    assert run.returncode == 0, run.stderr
    return lines(run.stdout)


def test_no_driver_notice_comes_once_before_anything_is_installed(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "NVIDIA_DRIVER=0", "SYSTEM_TORCH=0", empty_wheelhouse)
    notices = [i for i, ln in enumerate(out) if NOTICE in ln]
    assert len(notices) == 1
    first_install = min(i for i, ln in enumerate(out) if " pip install " in ln or " -m venv " in ln)
    assert notices[0] < first_install
    assert "make test CPU=1" in out[notices[0]] and "CUDA build" in out[notices[0]]
    # the notice informs; the build goes on with the default torch
    assert any(" pip install " in ln and '"torch>=2.4"' in ln for ln in out[first_install:])


@pytest.mark.parametrize("setting", ["NVIDIA_DRIVER=1", "CPU=1", "SYSTEM_TORCH=1", "TORCH=torch==2.13.0"])
def test_no_notice_when_torch_is_not_the_default_cuda_build_on_a_driverless_box(tmp_path, empty_wheelhouse,
                                                                                  setting):
    defaults = {"NVIDIA_DRIVER": "0", "SYSTEM_TORCH": "0"}
    name, value = setting.split("=", 1)
    defaults[name] = value
    out = install_lines(tmp_path, *(f"{k}={v}" for k, v in defaults.items()), empty_wheelhouse)
    assert not any(NOTICE in ln for ln in out)


def test_driver_is_detected_from_nvidia_smi_on_path(tmp_path, empty_wheelhouse):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (fake / "nvidia-smi").chmod(0o755)
    args = ("-n", "test", f"VENV={tmp_path / 'v'}", "SYSTEM_TORCH=0", empty_wheelhouse)
    assert NOTICE not in make(*args, path=f"{fake}:/usr/bin:/bin").stdout
    if Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has an NVIDIA driver")
    assert NOTICE in make(*args, path="/usr/bin:/bin").stdout


def test_cpu_build_comes_from_torchs_cpu_index_for_torch_only(tmp_path, empty_wheelhouse):
    out = install_lines(tmp_path, "CPU=1", "SYSTEM_TORCH=0", "NVIDIA_DRIVER=0", empty_wheelhouse)
    pips = [ln for ln in out if " pip install " in ln]
    assert [ln for ln in pips if CPU_INDEX in ln] == [ln for ln in pips if '"torch>=2.4"' in ln] != []
    assert sum(CPU_INDEX in ln for ln in pips) == 1


def test_ci_path_pinned_torch_names_no_index(tmp_path, empty_wheelhouse):
    """.ci/run: make test TORCH=torch==2.13.0 on a fresh clone installs from the configured index only."""
    out = install_lines(tmp_path, "TORCH=torch==2.13.0", "SYSTEM_TORCH=0", "NVIDIA_DRIVER=0", empty_wheelhouse)
    pips = [ln for ln in out if " pip install " in ln]
    assert any('"torch==2.13.0"' in ln for ln in pips)
    assert not any("--index-url" in ln or "http" in ln for ln in out)
    assert any('-e ".[test]"' in ln for ln in pips)


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
    assert stamp == {"TORCH": "torch==2.13.0", "SYSTEM_TORCH": "0", "CPU": "0", "LEAN": "1"}
    (tmp_path / "ran").unlink()

    for target in ("test", "run", "lab"):
        stop = make(target, f"VENV={venv}", "TORCH=torch>=2.4", empty_wheelhouse)
        assert stop.returncode != 0 and not (tmp_path / "ran").exists()     # stopped before anything ran
        (message,) = stop.stderr.strip().splitlines()
        assert "TORCH=torch==2.13.0" in message and "TORCH=torch>=2.4" in message and "make clean" in message
        assert not stop.stdout.strip()


@pytest.mark.parametrize("setting", ["LEAN=0", "CPU=1", "SYSTEM_TORCH=1"])
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
    assert any(CPU_INDEX in ln and '"torch==2.13.0"' in ln for ln in out)   # the recorded torch, CPU index
    assert any("--no-deps" in ln and "nvidia-cudnn-frontend" in ln for ln in out)   # still lean
    assert not any(NOTICE in ln for ln in out)


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


# ------------------------------------------------------------------ what the messages point at
def readme_headings() -> set[str]:
    return {ln.lstrip("#").strip() for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("#")}


def test_readme_headings_named_by_the_no_gpu_message_exist():
    source = (ROOT / "tools" / "execute.py").read_text()
    named = re.findall(r"see README, '([^']+)'", source)
    assert named, "tools/execute.py's no-GPU message names no README heading"
    assert set(named) <= readme_headings(), set(named) - readme_headings()
