"""Unit tests for helpers. CPU parts run everywhere; GPU parts skip without one."""
import csv
import math
from pathlib import Path

import pytest
import torch

import helpers as H
from helpers import device, features, libcudnn, results
from helpers.errors import CourseError, CudnnNotFoundError, FeatureUnavailable, NoGPUError
from helpers.timing.gpu import NotCapturable
from helpers.timing.per_call import Timing
from tools import notebooks
from tests.support import requires_gpu

# ------------------------------------------------------------------ checking
def test_rel_error_zero_for_equal_and_scales_with_difference():
    ref = torch.randn(64, 64, dtype=torch.float64)
    assert H.rel_error(ref.clone(), ref) == 0.0
    assert H.rel_error(ref * 1.01, ref) == pytest.approx(0.01, rel=1e-6)


def test_rel_error_is_inf_for_nan_output():
    ref = torch.randn(10)
    out = ref.clone()
    out[3] = float("nan")
    assert math.isinf(H.rel_error(out, ref))


def test_rel_error_rejects_shape_mismatch_and_non_tensors():
    with pytest.raises(ValueError, match="shape mismatch"):
        H.rel_error(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        H.rel_error([1.0], torch.zeros(1))


def test_check_passes_within_tolerance_and_names_case_on_failure(capsys):
    ref = torch.randn(256, 256)
    good = (ref + 1e-3 * torch.randn_like(ref)).bfloat16()
    assert H.check("close", good, ref).ok
    assert "PASS close" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="FAIL wrong case"):
        H.check("wrong case", torch.randn_like(ref).bfloat16(), ref)


def test_one_wrong_row_in_two_million_elements_fails_although_the_norm_passes():
    torch.manual_seed(0)
    ref = torch.randn(16384, 128, dtype=torch.float64)  # 2 M elements, rows of 128
    out = ref.to(torch.bfloat16)
    assert H.check("clean", out, ref, quiet=True).ok
    out[1234] = out[1235]  # one row holds its neighbour's values
    result = H.check("one wrong row", out, ref, raise_on_fail=False, quiet=True)
    assert result.rel_err <= result.tol, "the norm alone would have passed"
    assert not result.ok
    assert 64 < result.elements.n_bad <= 128 and result.elements.worst_index[0] == 1234
    assert "elements outside the element-wise bound, worst at (1234, " in str(result)
    with pytest.raises(AssertionError, match=r"FAIL one wrong row: rel err .* of 2097152 elements outside"):
        H.check("one wrong row", out, ref, quiet=True)


def test_element_bound_scales_with_the_output_and_keeps_pass_lines_unchanged(capsys):
    torch.manual_seed(1)
    for scale in (1e-3, 1.0, 1e3):  # attention outputs are small, matmul outputs large: same verdicts
        ref = scale * torch.randn(512, 512, dtype=torch.float64)
        noisy = (ref * (1 + 4e-3 * torch.randn_like(ref))).to(torch.bfloat16)  # rounding-sized noise
        assert H.check("noisy", noisy, ref).ok
    assert capsys.readouterr().out.splitlines()[0].startswith("PASS noisy: rel err ")
    ref = torch.randn(1000, dtype=torch.float64)
    spike = ref.clone().float()
    spike[7] += 0.5  # one element off by half a typical value
    result = H.check("spike", spike, ref, dtype=torch.bfloat16, raise_on_fail=False, quiet=True)
    assert result.elements.n_bad == 1 and result.elements.worst_index == (7,)


def test_poisoned_output_that_was_never_written_fails():
    ref = torch.randn(32)
    out = H.poison_(torch.empty(32, dtype=torch.bfloat16))
    result = H.check("unwritten", out, ref, raise_on_fail=False, quiet=True)
    assert not result.ok and result.unwritten == 32


def test_poison_fp8_gives_nan():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8")
    t = H.poison_(torch.empty(4, dtype=torch.float8_e4m3fn))
    assert torch.isnan(t.float()).all()


def test_tolerance_by_dtype_and_unknown_dtype():
    assert H.tolerance(torch.float16) < H.tolerance(torch.bfloat16)
    with pytest.raises(ValueError, match="no tolerance"):
        H.tolerance(torch.int32)


def test_check_table_lists_verdicts():
    ref = torch.randn(8)
    rows = [H.check("a", ref.clone(), ref, quiet=True), H.check("b", ref * 2, ref, raise_on_fail=False, quiet=True)]
    table = H.check_table(rows)
    assert list(table["verdict"]) == ["PASS", "FAIL"]


# ------------------------------------------------------------------ timing
def test_rate_helpers():
    assert H.tflops(2e12, 1000.0) == pytest.approx(2.0)
    assert H.gbps(4e9, 2.0) == pytest.approx(2000.0)


def test_call_time_rejects_bad_arguments_before_needing_a_gpu():
    with pytest.raises(TypeError, match="callable"):
        H.call_time(42)
    with pytest.raises(ValueError, match="iters"):
        H.call_time(lambda: None, iters=0)


@pytest.mark.skipif(device.has_gpu(), reason="checks the no-GPU message")
def test_no_gpu_gives_one_clear_line():
    with pytest.raises(NoGPUError, match="No NVIDIA GPU found") as exc:
        H.require_gpu()
    assert "\n" not in str(exc.value)
    with pytest.raises(NoGPUError):
        H.call_time(lambda: None)
    assert not H.gate("sdpa").ok and "no NVIDIA GPU" in H.gate("sdpa").reason


def test_gate_rejects_unknown_feature():
    with pytest.raises(ValueError, match="feature must be one of"):
        H.gate("warp-drive")


def test_gate_require_raises_feature_unavailable():
    g = features.Gate("fp8", False, "needs sm89+")
    with pytest.raises(FeatureUnavailable, match="fp8: needs sm89"):
        g.require()
    features.Gate("fp8", True, "ok").require()


def test_notebook_requirements_without_gpu():
    if device.has_gpu():
        pytest.skip("CPU-only behaviour")
    ok, reason = features.notebook_requirements_met({"gpu": True})
    assert not ok and "no NVIDIA GPU" in reason
    assert features.notebook_requirements_met({"gpu": False}) == (True, "")


def test_datasheet_lookup_prefers_specific_names():
    names = [row[0] for row in device._DATASHEET]
    assert names.index("H100 PCIe") < names.index("H100")
    assert names.index("A100-SXM4-80GB") < names.index("A100")


# ------------------------------------------------------------------ the GPU's clocks (NVML), without a GPU
def _fake_nvml(monkeypatch, *, clock=1755, power_mw=612_000, limit_mw=700_000, events=0x4, newer=True,
               power_fails=False):
    """A pynvml stand-in for device 0 (no CUDA_VISIBLE_DEVICES, so found by index) on a GPU torch 'has'."""
    import types

    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM = 1
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetHandleByUUID = lambda uuid: (_ for _ in ()).throw(RuntimeError("no such UUID"))
    nvml.nvmlDeviceGetHandleByIndex = lambda index: f"handle{index}"
    nvml.nvmlDeviceGetClockInfo = lambda handle, kind: clock if kind == 1 else 0
    nvml.nvmlDeviceGetMaxClockInfo = lambda handle, kind: 1980
    nvml.nvmlDeviceGetPowerUsage = (lambda handle: 1 / 0) if power_fails else (lambda handle: power_mw)
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda handle: limit_mw
    name = "nvmlDeviceGetCurrentClocksEventReasons" if newer else "nvmlDeviceGetCurrentClocksThrottleReasons"
    setattr(nvml, name, lambda handle: events)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(device, "has_gpu", lambda: True)
    device._nvml_handle.cache_clear()   # the handle is cached per device: find it again with this stand-in
    return nvml


@pytest.fixture
def fresh_nvml_cache():
    device._nvml_handle.cache_clear()
    yield
    device._nvml_handle.cache_clear()


def test_clock_event_names_decode_nvmls_mask():
    assert device.clock_event_names(0) == []
    assert device.clock_event_names(0x4) == ["sw_power_cap"]
    assert device.clock_event_names(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert device.clock_event_names(0x4 | 0x1000) == ["sw_power_cap", "0x1000"]


def test_power_verdict_needs_the_flag_and_a_draw_near_the_limit():
    window = dict(samples=100, reason="", sm_mhz=1300.0, sm_mhz_min=1100.0, power_w=680.0, power_w_max=695.0,
                  power_limit_w=700.0, throttle=["sw_power_cap"])
    assert H.power_verdict(window).startswith("power-capped")
    far = H.power_verdict(dict(window, power_w=300.0, power_w_max=386.0))
    assert far.startswith("the cap flag was seen") and "55%" in far and "neither shows nor rules out" in far
    assert H.power_verdict(dict(window, throttle=[], power_w_max=420.0)).startswith("not power-capped")
    nan = float("nan")
    unread = dict(sm_mhz=nan, sm_mhz_min=nan, power_w=nan, power_w_max=nan, power_limit_w=nan, throttle=[],
                  samples=0, reason="pynvml is not installed")
    assert H.power_verdict(unread) == ("clock and power not read (pynvml is not installed): no verdict on a "
                                       "power cap")
    assert H.power_verdict(dict(window, power_limit_w=nan)).startswith("power or power limit not read")


def test_gpu_clocks_without_pynvml_or_gpu_are_nan_with_the_reason(monkeypatch, fresh_nvml_cache):
    monkeypatch.setattr(device, "has_gpu", lambda: False)
    state = H.gpu_clocks()
    assert math.isnan(state["sm_mhz"]) and math.isnan(state["power_w"]) and state["throttle"] == []
    assert state["reason"] == "no GPU"
    monkeypatch.setattr(device, "has_gpu", lambda: True)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)   # import pynvml raises ImportError
    state = H.gpu_clocks(0)
    assert math.isnan(state["sm_mhz"]) and state["throttle"] == [] and "pynvml is not installed" in state["reason"]


def test_gpu_clocks_reads_clock_power_and_throttle_reasons(monkeypatch, fresh_nvml_cache):
    _fake_nvml(monkeypatch)
    assert H.gpu_clocks(0) == dict(sm_mhz=1755.0, max_sm_mhz=1980.0, power_w=612.0, power_limit_w=700.0,
                                   throttle=["sw_power_cap"], reason="")
    _fake_nvml(monkeypatch, events=0, newer=False)   # an older nvidia-ml-py: the "throttle" name
    assert H.gpu_clocks(0)["throttle"] == []


def test_gpu_clocks_keeps_what_it_could_read_and_says_what_it_could_not(monkeypatch, fresh_nvml_cache):
    _fake_nvml(monkeypatch, power_fails=True)
    state = H.gpu_clocks(0)
    assert state["sm_mhz"] == 1755.0 and math.isnan(state["power_w"]) and state["throttle"] == ["sw_power_cap"]
    assert state["reason"] == "power_w: ZeroDivisionError" and state["power_limit_w"] == 700.0
    del _fake_nvml(monkeypatch).nvmlDeviceGetEnforcedPowerLimit   # an NVML without the limit: the rest still read
    state = H.gpu_clocks(0)
    assert math.isnan(state["power_limit_w"]) and state["power_w"] == 612.0
    assert state["reason"] == "power_limit_w: AttributeError"


def test_gpu_clocks_finds_no_device_when_visible_devices_reorder_and_the_uuid_is_unknown(monkeypatch,
                                                                                          fresh_nvml_cache):
    _fake_nvml(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    state = H.gpu_clocks(0)
    assert math.isnan(state["sm_mhz"]) and state["reason"].startswith("NVML: ")


def test_sample_clocks_averages_the_samples_read_while_the_block_runs(monkeypatch):
    import itertools
    import time

    readings, given = itertools.cycle([(1980.0, 300.0, []), (1800.0, 690.0, ["sw_power_cap"])]), []

    def fake(index=None):
        mhz, watts, why = next(readings)
        given.append((mhz, watts))
        return dict(sm_mhz=mhz, max_sm_mhz=1980.0, power_w=watts, power_limit_w=700.0, throttle=why, reason="")

    monkeypatch.setattr(device, "has_gpu", lambda: False)
    monkeypatch.setattr(device, "gpu_clocks", fake)
    with H.sample_clocks(interval_s=0.002) as clocks:
        assert clocks["samples"] == 0   # filled when the block ends
        time.sleep(0.1)
    assert clocks["samples"] == len(given) >= 2 and clocks["reason"] == ""
    assert clocks["sm_mhz"] == pytest.approx(sum(m for m, _ in given) / len(given)) and clocks["sm_mhz_min"] == 1800.0
    assert clocks["power_w"] == pytest.approx(sum(w for _, w in given) / len(given))
    assert clocks["power_w_max"] == 690.0 and clocks["power_limit_w"] == 700.0
    assert clocks["throttle"] == ["sw_power_cap"]


def test_sample_clocks_without_nvml_gives_nan_no_samples_and_the_reason(monkeypatch, fresh_nvml_cache):
    monkeypatch.setattr(device, "has_gpu", lambda: True)
    monkeypatch.setattr(device.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with H.sample_clocks(interval_s=0.001) as clocks:
        pass
    assert clocks["samples"] == 0 and math.isnan(clocks["sm_mhz"]) and math.isnan(clocks["sm_mhz_min"])
    assert math.isnan(clocks["power_w_max"]) and math.isnan(clocks["power_limit_w"])
    assert clocks["throttle"] == [] and "pynvml is not installed" in clocks["reason"]


# ------------------------------------------------------------------ libcudnn
def test_missing_libcudnn_gives_actionable_error(monkeypatch):
    if device.has_gpu():
        pytest.skip("a GPU machine has a libcudnn")
    with pytest.raises(CudnnNotFoundError, match="pip install nvidia-cudnn-cu12"):
        H.load_cudnn()


def test_candidates_finds_a_library_on_ld_library_path(tmp_path, monkeypatch):
    fake = tmp_path / "libcudnn.so.9"
    fake.write_bytes(b"\x7fELF")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    found = libcudnn.libcudnn_candidates()
    assert any(c.path == str(fake) and c.source == "LD_LIBRARY_PATH" for c in found)


def test_package_dirs_handles_namespace_and_missing_packages():
    assert libcudnn._package_dirs("surely_not_a_package_xyz") == []
    assert libcudnn._package_dirs("helpers")  # a regular package has a folder


# ------------------------------------------------------------------ GraphIO (CPU side)
def test_graphio_rejects_cpu_tensor_wrong_dtype_and_layout():
    cudnn = pytest.importorskip("cudnn")
    graph = cudnn.pygraph(io_data_type=torch.bfloat16, compute_data_type=torch.float32)
    io = H.GraphIO(graph, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="X: tensor is on cpu"):
        io.input("X", torch.randn(2, 3))
    with pytest.raises(TypeError, match="X: expected a torch.Tensor"):
        io.input("X", [1, 2])
    with pytest.raises(TypeError, match="A: expected a torch.Tensor"):
        io._validate("A", 3.0, None, None)


def test_graphio_scalar_is_pass_by_value_with_explicit_uid():
    cudnn = pytest.importorskip("cudnn")
    graph = cudnn.pygraph(io_data_type=torch.bfloat16, compute_data_type=torch.float32)
    io = H.GraphIO(graph, first_uid=10)
    alpha = io.scalar("alpha", 0.5)
    assert alpha.is_pass_by_value and alpha.uid == 10 and io.uids == {"alpha": 10}
    with pytest.raises(ValueError, match="used twice"):
        io.scalar("alpha", 1.0)
    with pytest.raises(TypeError, match="Python number"):
        io.scalar("beta", torch.ones(1))
    with pytest.raises(KeyError, match="unknown tensor name"):
        io.pack(gamma=torch.ones(1))
    assert io.pack()[10].item() == 0.5


def test_step_timer_records_each_step():
    timer = H.StepTimer()
    with timer("a"):
        pass
    with timer("b"):
        pass
    assert list(timer.ms) == ["a", "b"]
    assert list(timer.table().index) == ["a", "b", "total"]


# ------------------------------------------------------------------ results and stamps
def test_results_upsert_and_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    fake = device.DeviceInfo(name="Fake GPU", index=0, sm=(9, 0), sm_count=1, memory_gb=1.0, l2_bytes=1)
    monkeypatch.setattr(device, "device_info", lambda index=None: fake)
    results.record("02", "fused ms", 0.1, "ms")
    results.record("02", "fused ms", 0.09, "ms")
    results.record("03", "plans", 40, "count")
    rows = list(csv.DictReader(open(tmp_path / "fake-gpu.csv")))
    assert [(r["notebook"], r["metric"], r["value"]) for r in rows] == [("02", "fused ms", "0.09"), ("03", "plans", "40")]
    from tools.results_csv import headline_table
    assert headline_table("fake-gpu").split("\n") == ["  02", "      fused ms       0.09000 ms", "  03",
                                                      "      plans            40.00 count"]
    with pytest.raises(TypeError, match="must be a number"):
        results.record("02", "bad", "fast", "ms")


def test_code_hash_changes_with_code_not_outputs():
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("# t"), new_code_cell("x = 1")])
    before = notebooks.code_hash(nb)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    nb.cells[0].source = "# changed text"
    assert notebooks.code_hash(nb) == before
    nb.cells[1].source = "x = 2"
    assert notebooks.code_hash(nb) != before


def test_code_hash_ignores_comments_and_blank_lines_but_not_code_or_strings():
    from nbformat.v4 import new_code_cell, new_notebook

    def hashed(source):
        return notebooks.code_hash(new_notebook(cells=[new_code_cell(source)]))

    base = hashed('x = 1  # one\nprint("# not a comment")')
    assert hashed('# a better comment\n\nx = 1   # one, fixed\n\nprint("# not a comment")') == base
    assert hashed('x = 1\nprint("# not a comment")') == base
    assert hashed('x = 2  # one\nprint("# not a comment")') != base
    assert hashed('x = 1  # one\nprint("# not a comment!")') != base, "a string is code, not a comment"
    assert hashed('if x:\n    y = 1\nz = 2') != hashed('if x:\n    y = 1\n    z = 2'), "indentation is code"


def test_executor_kernels_draw_inline_whatever_the_callers_backend(monkeypatch):
    from tools.execute import INLINE_BACKEND, kernel_env

    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert kernel_env()["MPLBACKEND"] == INLINE_BACKEND


def test_compact_warnings_carry_no_file_path():
    import warnings

    before = warnings.formatwarning
    try:
        H.compact_warnings()   # what a setup cell calls: the format a notebook's stderr shows for any warning
        shown = warnings.formatwarning("plan cache entry was foreign", UserWarning, "/home/alice/course/x.py", 212)
    finally:
        warnings.formatwarning = before
    assert shown == "UserWarning: plan cache entry was foreign\n"


def test_importing_helpers_leaves_the_warning_format_alone():
    import subprocess
    import sys

    code = ("import warnings; before = warnings.formatwarning; import helpers; "
            "assert warnings.formatwarning is before, 'import changed the format'; "
            "helpers.compact_warnings(); assert warnings.formatwarning is not before; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_tidy_paths_replaces_machine_specific_folders():
    import sys
    import tempfile

    text = H.tidy_paths(f"{sys.prefix}/bin/python {tempfile.gettempdir()}/x /home/alice/y "
                        "/opt/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9 /usr/lib/libc.so")
    assert text.split() == ["<python-env>/bin/python", "<tmp>/x", "~/y",
                            "<site-packages>/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib/libc.so"]
    assert H.tidy_paths(None) == ""


def test_make_keeps_a_system_cuda_torch(tmp_path):
    """SYSTEM_TORCH=1 (auto-detected when python3 has a CUDA torch): a venv that sees the system packages,
    and no torch download."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("needs make")
    root = Path(__file__).resolve().parent.parent
    venv = tmp_path / "venv"
    dry = lambda *args: subprocess.run(["make", "-n", "-B", "test", f"VENV={venv}", *args], cwd=root,
                                       capture_output=True, text=True, check=True).stdout
    system = dry("SYSTEM_TORCH=1")
    assert "--system-site-packages" in system and 'pip install -q  "torch' not in system and '"torch' not in system
    own = dry("SYSTEM_TORCH=0", "TORCH=torch==2.13.0")
    assert "--system-site-packages" not in own and '"torch==2.13.0"' in own


def test_execute_without_gpu_prints_one_line_and_fails(capsys):
    if device.has_gpu():
        pytest.skip("CPU-only behaviour")
    from tools.execute import main

    assert main([]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("No NVIDIA GPU found") and "\n" not in out


# ------------------------------------------------------------------ on a GPU
@requires_gpu
def test_gpu_device_facts_and_dtype():
    d = H.require_gpu()
    assert d.sm >= (5, 0) and d.sm_count > 0 and d.memory_gb > 1
    assert H.working_dtype() in (torch.bfloat16, torch.float16)
    assert set(d.datasheet_tflops) == {"bfloat16", "float16", "float8_e4m3fn"}
    if d.datasheet_tflops["bfloat16"]:  # a GPU in the table: the datasheet ceiling is the one asked for
        assert H.peak_tflops(torch.bfloat16, measured=False) == d.datasheet_tflops["bfloat16"]


@requires_gpu
def test_gpu_clocks_on_a_gpu_read_or_say_why_not():
    state = H.gpu_clocks()
    assert set(state) == {"sm_mhz", "max_sm_mhz", "power_w", "power_limit_w", "throttle", "reason"}
    if not state["reason"]:   # pynvml there and NVML answering
        assert 0 < state["sm_mhz"] <= state["max_sm_mhz"] and all(isinstance(r, str) for r in state["throttle"])
    with H.sample_clocks() as clocks:
        H.call_time(lambda: torch.cuda._sleep(1_000_000), warmup=1, iters=20)
    assert clocks["samples"] > 0 or clocks["reason"]


@requires_gpu
def test_gpu_call_time_measures_a_sleep():
    t = H.call_time(lambda: torch.cuda._sleep(1_000_000), warmup=1, iters=5)
    assert t.median_ms > 0.05 and t.p10_ms <= t.median_ms <= t.p90_ms


@requires_gpu
def test_gpu_call_time_cuts_off_slow_function():
    t = H.call_time(lambda: torch.cuda._sleep(50_000_000), warmup=5, iters=50, max_ms=1.0)
    assert t.cut_off and t.runs == 1


@requires_gpu
def test_gpu_fused_graph_runs_and_checks():
    cudnn = H.load_cudnn()
    assert H.loaded_library()
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    graph = cudnn.pygraph(io_data_type=torch.float16, compute_data_type=torch.float32, handle=H.get_handle())
    io = H.GraphIO(graph, dtype=torch.float16)
    X = io.input("X", x.view(1, 8, 64))
    y = H.poison_(torch.empty(1, 8, 64, device="cuda", dtype=torch.float16))
    io.output("Y", graph.relu(X), y)
    H.build(graph)
    io.check_buffers()
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    H.check("relu", y, torch.relu(x.float()).view(1, 8, 64))


@requires_gpu
def test_gpu_graphio_rejects_wrong_dtype_and_layout():
    cudnn = H.load_cudnn()
    graph = cudnn.pygraph(io_data_type=torch.float16)
    io = H.GraphIO(graph, dtype=torch.float16)
    with pytest.raises(TypeError, match="X: dtype is torch.float32"):
        io.input("X", torch.randn(2, 3, device="cuda"))
    nchw = torch.randn(2, 3, 4, 5, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="W: tensor is not in torch.channels_last"):
        io.input("W", nchw, layout=torch.channels_last)


def test_test_runs_record_into_a_scratch_folder_not_results():
    """nbval re-execution must not rewrite the committed results/ (see conftest.pytest_configure)."""
    committed = Path(__file__).resolve().parent.parent / "results"
    assert results.results_dir().resolve() != committed.resolve()


def test_results_holds_headline_numbers_only():
    """The autotune hand-off (03 -> 06) lives in artifacts/, not next to the committed numbers."""
    committed = Path(__file__).resolve().parent.parent / "results"
    assert {f.suffix for f in committed.iterdir()} <= {".csv"}, sorted(f.name for f in committed.iterdir())


# ------------------------------------------------------------------ GPU time without the host
def test_gpu_time_rejects_bad_arguments_before_needing_a_gpu():
    with pytest.raises(TypeError, match="fn must be callable"):
        H.gpu_time(42)
    with pytest.raises(ValueError, match="calls >= 1"):
        H.gpu_time(lambda: None, calls=0)


@requires_gpu
def test_gpu_time_leaves_out_host_overhead_that_per_call_timing_pays():
    import time

    x = torch.randn(256, device="cuda")

    def slow_host_fast_gpu():
        time.sleep(0.002)  # 2 ms of Python before a tiny kernel
        x.add_(1)

    # Per-call events see the host's 2 ms only while this process has the GPU to itself. With another
    # process's kernels on the same GPU (pytest -n 2, two suites at once) both events can run after the sleep,
    # and a run measures ~0 (seen on the H200 under COURSE_GPU=a100/h100 with two suites sharing it):
    # measure again, a few times at most, before calling per-call timing broken.
    for _ in range(3):
        per_call = H.call_time(slow_host_fast_gpu, warmup=1, iters=5, flush_l2=False)
        if per_call.median_ms > 1.5:
            break
    gpu = H.gpu_time(slow_host_fast_gpu, calls=4, warmup=1, iters=5, flush_l2=False)
    assert per_call.median_ms > 1.5 and gpu.median_ms < 0.2, (per_call, gpu)


@requires_gpu
def test_gpu_time_of_a_cudnn_closure_holding_the_course_handle():
    cudnn = H.load_cudnn()
    x = torch.randn(1, 64, 64, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    graph = cudnn.pygraph(io_data_type=torch.float16, compute_data_type=torch.float32, handle=H.get_handle())
    io = H.GraphIO(graph)
    io.output("Y", graph.relu(io.input("X", x)), y)
    H.build(graph)
    pack, ws, handle = io.pack(), H.workspace_for(graph), H.get_handle()
    t = H.gpu_time(lambda: graph.execute(pack, ws, handle=handle), calls=5, iters=5)
    assert 0 < t.median_ms < 1.0
    assert cudnn.get_stream(handle) == torch.cuda.current_stream().cuda_stream  # rebound afterwards
    own = cudnn.create_handle()  # bound to the default stream, never to the capture stream
    with pytest.raises(NotCapturable):
        H.gpu_time(lambda: graph.execute(pack, ws, handle=own), iters=2)
    cudnn.destroy_handle(own)


def test_gpu_timing_or_reason_gives_the_timing_or_the_reason(monkeypatch, capsys):
    from helpers.timing import gpu

    def fake_gpu_time(fn, **kwargs):
        if kwargs.get("calls") == 2:
            raise NotCapturable("cannot capture this function in a CUDA graph: it syncs")
        return Timing(0.02, 0.019, 0.023, 20)

    monkeypatch.setattr(gpu, "gpu_time", fake_gpu_time)
    timing, reason = H.gpu_timing_or_reason(lambda: None, calls=10)
    assert reason == "" and timing.spread == pytest.approx(0.2)
    assert H.gpu_ms_or_reason(lambda: None) == (0.02, "")
    timing, reason = H.gpu_timing_or_reason(lambda: None, label="p", calls=2)
    assert timing is None and "it syncs" in reason and "p: no GPU time" in capsys.readouterr().out
    ms, reason = H.gpu_ms_or_reason(lambda: None, calls=2)
    assert math.isnan(ms) and "it syncs" in reason


def test_timing_table_builds_every_column_from_the_one_timer_of_each(monkeypatch):
    from helpers.timing import gpu

    def fake_benchmark(fn, **kwargs):
        ms = fn()
        return Timing(ms, 0.9 * ms, 1.2 * ms, 5)

    gpu_calls = []

    def fake_gpu(fn, *, label=None, **kwargs):
        gpu_calls.append((label, kwargs))
        return (float("nan"), "cannot capture") if label == "b" else (fn() / 2, "")

    monkeypatch.setattr(gpu, "call_time", fake_benchmark)
    monkeypatch.setattr(gpu, "host_us", lambda fn: 7.0)
    monkeypatch.setattr(gpu, "gpu_ms_or_reason", fake_gpu)
    paths = {"a": lambda: 0.4, "b": lambda: 0.1, "c": lambda: 0.2}
    table = H.timing_table(paths, baseline="a", gpu=["a", "b"], host=True, per=("layer", 4), iters=9,
                           flush_l2=False, gpu_iters=11)
    assert list(table.columns) == ["µs per call", "GPU µs", "host µs per call", "µs per layer", "speedup vs a", "spread"]
    assert table["µs per call"].to_dict() == pytest.approx({"a": 400.0, "b": 100.0, "c": 200.0})
    assert table.loc["a", "GPU µs"] == pytest.approx(200.0) and table["GPU µs"][["b", "c"]].isna().all()
    assert gpu_calls == [("a", dict(iters=11, flush_l2=False)), ("b", dict(iters=11, flush_l2=False))]
    assert table["µs per layer"]["a"] == pytest.approx(100.0) and table["speedup vs a"]["b"] == pytest.approx(4.0)
    assert table["spread"]["c"] == pytest.approx(0.3) and (table["host µs per call"] == 7.0).all()
    plain = H.timing_table({"x": lambda: 1.0})
    assert list(plain.columns) == ["µs per call", "spread"]


def test_cuda_call_returns_the_values_and_names_the_error(monkeypatch):
    from types import SimpleNamespace

    from helpers import cuda_runtime

    codes = SimpleNamespace(cudaSuccess=0, cudaErrorInvalidValue=1)
    monkeypatch.setattr(cuda_runtime, "cudart", lambda: SimpleNamespace(cudaError_t=codes))
    assert H.cuda_call((0, "graph")) == "graph"
    assert H.cuda_call((0, 1, 2)) == (1, 2) and H.cuda_call((0,)) == ()
    with pytest.raises(CourseError, match="^CUDA runtime call failed: 1$"):
        H.cuda_call((1,))


def test_build_calls_restrict_after_lowering_and_before_the_candidates():
    """H.build(restrict=f) sets a plan filter where notebook 03 teaches it: after build_operation_graph, before
    create_execution_plans (a workspace limit set before validate() was not applied on the H200)."""
    calls = []

    class Graph:
        def __getattr__(self, name):
            def step(*args):
                calls.append(name)
                if name == "get_execution_plan_count":
                    return 2
                if name == "build_plan_at_index" and args[0] == 0:
                    raise RuntimeError("barred by the filter")
            return step

    timer = H.build(Graph(), heuristics=["A"], restrict=lambda g: calls.append("restrict"), pick="first")
    assert calls[:4] == ["validate", "build_operation_graph", "restrict", "create_execution_plans"]
    assert timer.plan == 1   # plan 0 refused: the first that builds is selected


def test_host_timing_times_back_to_back_calls_after_warmup(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    calls = []
    timing = H.host_timing(lambda: calls.append(1), warmup=2, iters=7)
    assert len(calls) == 9 and timing.runs == 7 and len(timing.times_ms) == 7
    assert 0 <= timing.p10_ms <= timing.median_ms <= timing.p90_ms
    import time
    assert H.host_timing(lambda: time.sleep(0.002), warmup=0, iters=3).median_ms >= 2.0   # the call's own wall time
    assert H.host_us(lambda: time.sleep(0.002), calls=3) >= 2000.0
    with pytest.raises(ValueError):
        H.host_timing(lambda: None, iters=0)
    with pytest.raises(TypeError):
        H.host_timing(42)


def test_loading_cudnn_makes_warnings_one_line_without_paths(monkeypatch):
    """The setup cell's ``H.load_cudnn()`` also does what ``H.compact_warnings()`` did: a warning prints as
    ``Category: message``, with no machine's file path in a stored output."""
    import warnings

    from helpers import errors, libcudnn

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    libcudnn.load_cudnn(need_gpu=False)
    assert warnings.formatwarning is errors._format_warning
    assert warnings.formatwarning("slow", UserWarning, "/home/me/x.py", 3) == "UserWarning: slow\n"
