"""COURSE_GPU profiles: the course's view of a GPU users have (CPU tests; the GPU runs use the real device)."""
from types import SimpleNamespace

import pytest
import torch

import helpers as H
from helpers import device, features
from helpers.device import PROFILES
from helpers.features import FEATURES, gate_for
from tools import gpu_matrix

BACKEND = 91900  # Colab's cuDNN and the stored run's

# What each GPU can run with cuDNN 9.19: the datasheets' compute capabilities against the gates' rules.
EXPECTED = {
    "t4": (torch.float16, {"kernel_cache", "kernel_cache_serialize", "native_cuda_graph", "graph_wrapper"}),
    "l4": (torch.bfloat16, {"bf16", "sdpa", "fp8", "sdpa_serving", "kernel_cache", "kernel_cache_serialize",
                            "native_cuda_graph", "graph_wrapper", "norm_graphs"}),
    "a100": (torch.bfloat16, {"bf16", "sdpa", "sdpa_serving", "kernel_cache", "kernel_cache_serialize",
                              "native_cuda_graph", "graph_wrapper", "norm_graphs"}),
    "h100": (torch.bfloat16, {"bf16", "sdpa", "fp8", "sdpa_serving", "sdpa_fp8", "kernel_cache",
                              "kernel_cache_serialize", "native_cuda_graph", "graph_wrapper", "norm_graphs"}),
}


def _as_device(profile):
    return device.DeviceInfo(name=profile.name, index=0, sm=profile.sm, sm_count=profile.sm_count,
                             memory_gb=profile.memory_gb, l2_bytes=0)


def test_the_four_user_gpus_have_profiles():
    assert set(PROFILES) == set(EXPECTED) == set(gpu_matrix.COLUMNS)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_each_profile_has_its_gpus_gates_and_dtype(key):
    profile = PROFILES[key]
    dtype, supported = EXPECTED[key]
    assert device.working_dtype(_as_device(profile)) == dtype
    ok = {f for f in FEATURES if gate_for(f, profile.name, profile.sm, BACKEND).ok}
    assert ok == supported, f"{key}: runs {sorted(ok)}"
    for f in set(FEATURES) - ok:
        assert gate_for(f, profile.name, profile.sm, BACKEND).reason, f"{key}: {f} is refused without a reason"


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_each_profile_has_datasheet_peaks_for_its_working_dtype(key):
    profile = PROFILES[key]
    bf16, fp16, fp8, gbps = device.datasheet_row(profile.name)
    peak = {torch.bfloat16: bf16, torch.float16: fp16}[EXPECTED[key][0]]
    assert peak and gbps, f"{profile.name}: no datasheet row"
    assert (fp8 is not None) == ("fp8" in EXPECTED[key][1])


def test_the_switch_is_off_by_default_and_rejects_unknown_gpus(monkeypatch):
    monkeypatch.delenv("COURSE_GPU", raising=False)
    assert device.active_profile() is None
    monkeypatch.setenv("COURSE_GPU", "")
    assert device.active_profile() is None
    monkeypatch.setenv("COURSE_GPU", " T4 ")
    assert device.active_profile() is PROFILES["t4"]
    monkeypatch.setenv("COURSE_GPU", "v100")
    with pytest.raises(ValueError, match=r"COURSE_GPU='v100' is not a GPU profile; use one of t4, l4, a100, h100"):
        device.active_profile()


class _FakeCuda:
    """torch.cuda on a pretend H200, recording the memory cap a profile sets."""

    def __init__(self):
        self.fraction = None

    def get_device_properties(self, index):
        return SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                               total_memory=140 * 2**30, L2_cache_size=60 * 2**20)

    def set_per_process_memory_fraction(self, fraction, index):
        self.fraction = fraction

    def current_device(self):
        return 0


@pytest.fixture
def pretend_h200(monkeypatch):
    fake = _FakeCuda()
    monkeypatch.setattr(device, "has_gpu", lambda: True)
    monkeypatch.setattr(device.torch.cuda, "get_device_properties", fake.get_device_properties)
    monkeypatch.setattr(device.torch.cuda, "set_per_process_memory_fraction", fake.set_per_process_memory_fraction)
    monkeypatch.setattr(device.torch.cuda, "current_device", fake.current_device)
    monkeypatch.setattr(device, "_announced", [])
    device._device_info.cache_clear()
    yield fake
    device._device_info.cache_clear()


def test_a_profile_changes_the_view_caps_memory_and_keeps_the_real_cache(pretend_h200, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_GPU", "t4")
    d = device.require_gpu()
    assert (d.name, d.sm, d.sm_count, d.memory_gb) == ("Tesla T4", (7, 5), 40, 14.7)
    assert d.rehearsed_on == "NVIDIA H200" and d.l2_bytes == 60 * 2**20  # the flush covers the real L2
    assert d.datasheet_tflops["float16"] == 65.0 and d.datasheet_tflops["bfloat16"] is None
    assert pretend_h200.fraction == pytest.approx(14.7 / 140)
    assert device.working_dtype() == torch.float16
    rehearsal, cap = capsys.readouterr().out.splitlines(keepends=True)
    assert rehearsal.startswith("COURSE_GPU=t4: rehearsing a Tesla T4 (sm75") and "H200" in rehearsal
    assert cap == ("COURSE_GPU=t4: torch's allocator is capped at 14.7 GiB, the Tesla T4's memory "
                   "(10.5% of the NVIDIA H200's 140.0 GiB).\n")
    pretend_h200.fraction = None
    device.require_gpu()
    assert capsys.readouterr().out == "" and pretend_h200.fraction is None, "one cap and two lines per process"


def test_reading_the_device_under_a_profile_has_no_side_effect(pretend_h200, monkeypatch, capsys):
    monkeypatch.setattr(features, "has_gpu", lambda: True)
    monkeypatch.setattr(features, "backend_version", lambda: BACKEND)
    monkeypatch.setenv("COURSE_GPU", "t4")
    assert device.device_info().name == "Tesla T4" and not H.gate("bf16") and H.gate("kernel_cache")
    assert pretend_h200.fraction is None and capsys.readouterr().out == "", "only require_gpu() caps the memory"
    monkeypatch.delenv("COURSE_GPU")
    with pytest.raises(ValueError, match="NVIDIA H200 is the real GPU"):
        device.cap_memory(device.device_info())


def test_without_a_profile_the_view_is_the_real_gpu(pretend_h200, monkeypatch, capsys):
    monkeypatch.delenv("COURSE_GPU", raising=False)
    d = device.require_gpu()
    assert (d.name, d.sm, d.rehearsed_on) == ("NVIDIA H200", (9, 0), None)
    assert pretend_h200.fraction is None and capsys.readouterr().out == ""


def test_gates_and_notebook_needs_follow_the_profile(pretend_h200, monkeypatch):
    monkeypatch.setattr(features, "has_gpu", lambda: True)
    monkeypatch.setattr(features, "backend_version", lambda: BACKEND)
    monkeypatch.setenv("COURSE_GPU", "a100")
    assert not H.gate("fp8") and "sm89" in H.gate("fp8").reason and H.gate("sdpa")
    monkeypatch.setenv("COURSE_GPU", "t4")
    assert not H.gate("sdpa")
    ok, why = H.notebook_requirements_met({"gpu": True, "min_sm": 80, "features": ["sdpa"]})
    assert not ok and why == "needs sm80+, this Tesla T4 is sm75"


def test_make_run_refuses_a_profile(monkeypatch, capsys):
    from tools import execute

    monkeypatch.setenv("COURSE_GPU", "l4")
    assert execute.main([]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "unset COURSE_GPU" in out


# ------------------------------------------------------------------ the table (the website shows it: tests/test_site.py)
def test_the_table_says_what_each_gpu_skips():
    import nbformat

    from tools.notebooks import notebook_path

    def verdict(number, key):
        nb = nbformat.read(notebook_path(number), as_version=4)
        return gpu_matrix.verdict(nb, key)[0]

    assert verdict("05", "t4") == "skipped: needs sm80+, this T4 is sm75"
    assert verdict("04", "a100").startswith("runs; skips FP8 GEMM (sm89+)")
    assert verdict("05", "l4") == "runs; skips FP8 attention (sm90+)"
    assert verdict("08", "t4").startswith("runs; skips fused attention (sm80+)")
    assert verdict("02", "t4") == "runs; skips norm deep dives (sm80+)" and verdict("03", "t4") == "runs"


def test_the_memory_column_names_the_gpus_a_notebook_runs_on_but_does_not_fit():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("DEVICE = H.require_gpu()")]
    assert gpu_matrix._memory_verdict(nb, 20.0) == "20.0 GiB: over T4"
    assert gpu_matrix._memory_verdict(nb, 3.0) == "3.0 GiB: fits every GPU it runs on"
    nb.cells.append(nbformat.v4.new_code_cell('SDPA = H.gate("sdpa")\nSDPA.require()'))
    assert gpu_matrix._memory_verdict(nb, 20.0) == "20.0 GiB: fits every GPU it runs on"   # no T4: it does not run there
    assert gpu_matrix._memory_verdict(nb, 30.0) == "30.0 GiB: over L4"
    assert gpu_matrix._memory_verdict(nb, None) == "not recorded"
