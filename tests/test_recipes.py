"""Recipes, workers, the sweep helper and the graph plumbing they share.

On CPU, graphs are constructed from meta tensors (construction works without a GPU up to validate());
the GPU tests build and run them."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import helpers as H
from helpers.recipes import autotune, conv_bias_relu, matmul_bias_act, sdpa
from tests.support import requires_gpu

ROOT = Path(__file__).resolve().parent.parent
cudnn = pytest.importorskip("cudnn")
META = dict(device="meta")


def _nodes(graph):
    return [(n.name, n.node_type.name) for n in graph.nodes]


# ------------------------------------------------------------------ graphs from recipes (CPU, meta tensors)
def test_conv_bias_relu_graph_has_three_ops_and_nhwc_buffers():
    t = conv_bias_relu.make_tensors(2, 8, 10, 16, 3, 1, 2, dtype=torch.bfloat16, **META)
    assert t["y"].shape == (2, 16, 5, 5) and t["y"].is_contiguous(memory_format=torch.channels_last)
    graph, io = conv_bias_relu.graph(t, padding=1, stride=2)
    assert _nodes(graph) == [("conv", "CONV_FPROP"), ("bias", "POINTWISE"), ("relu", "POINTWISE")]
    assert list(io.uids) == ["x", "w", "b", "y"]
    assert graph.nodes[0].params["stride"] == [2, 2]
    assert conv_bias_relu.flops(t) == 2 * 2 * 16 * 5 * 5 * 8 * 9


def test_graph_options_reach_pygraph():
    t = conv_bias_relu.make_tensors(1, 4, 8, 4, dtype=torch.float16, **META)
    graph, _ = conv_bias_relu.graph(t, is_dynamic_shape_enabled=True)
    assert graph._cpp_graph_kwargs.get("is_dynamic_shape_enabled") is True  # what pygraph hands the backend
    plain, _ = conv_bias_relu.graph(t)
    assert not plain._cpp_graph_kwargs.get("is_dynamic_shape_enabled")


def test_conv_out_size_matches_torch():
    for size, filt, pad, stride in [(56, 3, 1, 1), (56, 3, 1, 2), (224, 7, 3, 2), (28, 1, 0, 1)]:
        x = torch.empty(1, 1, size, size)
        out = torch.nn.functional.conv2d(x, torch.empty(1, 1, filt, filt), padding=pad, stride=stride)
        assert conv_bias_relu.out_size(size, filt, pad, stride) == out.shape[-1]


def test_conv_reference_is_float64_relu_of_conv_plus_bias():
    t = conv_bias_relu.make_tensors(1, 3, 6, 2, dtype=torch.float32, seed=0, device="cpu")
    ref = conv_bias_relu.reference(t)
    assert ref.dtype == torch.float64 and (ref >= 0).all()
    by_hand = torch.relu(torch.nn.functional.conv2d(t["x"].double(), t["w"].double(), padding=1) + t["b"].double())
    assert torch.allclose(ref, by_hand)


def test_make_tensors_is_reproducible_with_a_seed_and_poisons_the_output():
    a = conv_bias_relu.make_tensors(1, 3, 6, 2, dtype=torch.float32, seed=7, device="cpu")
    b = conv_bias_relu.make_tensors(1, 3, 6, 2, dtype=torch.float32, seed=7, device="cpu")
    assert all(torch.equal(a[k], b[k]) for k in "xwb") and torch.isnan(a["y"]).all()


def test_matmul_bias_act_graph_and_reference():
    t = matmul_bias_act.make_tensors(1, 16, 32, 64, dtype=torch.bfloat16, **META)
    graph, io = matmul_bias_act.graph(t, act="relu")
    assert _nodes(graph) == [("matmul", "MATMUL"), ("bias", "POINTWISE"), ("relu", "POINTWISE")]
    with pytest.raises(ValueError, match="act must be one of"):
        matmul_bias_act.graph(t, act="tanh")
    cpu = matmul_bias_act.make_tensors(1, 4, 8, 3, dtype=torch.float32, device="cpu")
    assert torch.allclose(matmul_bias_act.reference(cpu, act="relu"),
                          torch.relu(cpu["x"] @ cpu["w"] + cpu["b"]))


def test_gemm_amax_graph_has_a_column_major_w_and_a_scalar_amax_output():
    t = matmul_bias_act.make_gemm_amax_tensors(1, 16, 32, 64, dtype=torch.bfloat16, **META)
    assert t["w"].shape == (1, 32, 64) and t["w"].stride() == (2048, 1, 32)   # K×N, column-major
    assert t["amax"].shape == (1, 1, 1) and t["amax"].dtype == torch.float32
    graph, io = matmul_bias_act.gemm_amax_graph(t)
    assert _nodes(graph) == [("matmul", "MATMUL"), ("amax", "REDUCTION")]
    assert list(io.uids) == ["x", "w", "y", "amax"]
    cpu = matmul_bias_act.make_gemm_amax_tensors(1, 4, 8, 3, dtype=torch.float32, device="cpu")
    y, amax = matmul_bias_act.gemm_amax_reference(cpu)
    assert torch.allclose(y, cpu["x"] @ cpu["w"]) and amax.shape == (1, 1, 1)
    assert amax.item() == (cpu["x"] @ cpu["w"]).abs().max().item()


def test_sdpa_forward_graph_is_causal_top_left_with_stats_for_gqa():
    q = torch.empty(2, 8, 128, 64, dtype=torch.bfloat16, **META)
    kv = torch.empty(2, 2, 128, 64, dtype=torch.bfloat16, **META)
    graph, io, outputs = sdpa.forward_graph(q, kv, kv, causal=True, attn_scale=0.125, generate_stats=True)
    node = graph.nodes[0]
    assert node.node_type.name == "SDPA"
    assert str(node.params["diagonal_alignment"]).endswith("TOP_LEFT") and node.params["diagonal_band_right_bound"] == 0
    assert list(io.uids) == ["q", "k", "v", "o", "stats"]
    assert outputs["o"].shape == q.shape and outputs["stats"].shape == (2, 8, 128, 1)
    assert outputs["stats"].dtype == torch.float32
    _, io2, outputs2 = sdpa.forward_graph(q, kv, kv, causal=False, attn_scale=0.125, generate_stats=False)
    assert list(outputs2) == ["o"] and sdpa.causal_mask(False) == {}
    assert sdpa.flops(1, 1, 4, 2, causal=True) == 0.5 * sdpa.flops(1, 1, 4, 2, causal=False)


def test_graphio_output_takes_the_buffers_dims_and_strides():
    """A transposed or reduced output buffer is described to the graph as it is."""
    graph = cudnn.pygraph(io_data_type=torch.bfloat16, compute_data_type=torch.float32)
    io = H.GraphIO(graph, dtype=torch.bfloat16)
    x = torch.empty(2, 16, 32, dtype=torch.bfloat16, **META)
    y = io.input("x", x)
    out = torch.empty(2, 32, 16, dtype=torch.bfloat16, **META).transpose(1, 2)  # column-major [2,16,32]
    relu = graph.relu(y, name="relu")
    io.output("y", relu, out)
    assert list(relu.dim) == [2, 16, 32] and list(relu.stride) == list(out.stride())
    amax_buf = torch.empty(1, 1, 1, dtype=torch.float32, **META)
    amax = graph.reduction(relu, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32, name="amax")
    io.output("amax", amax, amax_buf)
    assert list(amax.dim) == [1, 1, 1]


# ------------------------------------------------------------------ workspace_for
class _FakePlans:
    def __init__(self, sizes, selected):
        self.sizes, self.selected = sizes, selected

    def get_workspace_size(self):
        return self.sizes[self.selected]

    def get_workspace_size_plan_at_index(self, i):
        return self.sizes[i]


@requires_gpu
def test_workspace_for_a_plan_or_the_largest_of_several():
    g = _FakePlans([0, 4096, 512], selected=2)
    assert H.workspace_for(g).numel() == 512
    assert H.workspace_for(g, plan=1).numel() == 4096
    assert H.workspace_for(g, plan=0).numel() == 1          # never empty
    assert H.workspace_for(g, plan=[0, 2]).numel() == 512
    assert H.workspace_for(g).dtype == torch.uint8


# ------------------------------------------------------------------ the autotune hand-off
CHOICE = {"gpu": "NVIDIA H200", "cudnn_backend": 91900, "shape": {"N": 32}, "dtype": "bfloat16", "plan_name": "p"}


def test_choice_round_trip_in_the_artifacts_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_ARTIFACTS_DIR", str(tmp_path / "artifacts"))
    path = autotune.save_choice(CHOICE, "nvidia-h200")
    assert path == tmp_path / "artifacts" / "autotune-nvidia-h200.json"
    assert autotune.load_choice("nvidia-h200") == CHOICE
    assert autotune.load_choice("other-gpu") is None
    path.write_text("{ not json")
    assert autotune.load_choice("nvidia-h200") is None      # a damaged file reads as 'no choice'


def test_choice_problem_names_what_differs():
    here = dict(gpu="NVIDIA H200", cudnn_backend=91900, shape={"N": 32}, dtype="bfloat16")
    assert autotune.choice_problem(CHOICE, **here) is None
    assert "run notebook 03" in autotune.choice_problem(None, **here)
    assert "not this" in autotune.choice_problem(dict(CHOICE, gpu="NVIDIA A100"), **here)
    assert "backend" in autotune.choice_problem(dict(CHOICE, cudnn_backend=92100), **here)
    assert "shape" in autotune.choice_problem(dict(CHOICE, shape={"N": 64}), **here)


def test_plan_notes_names_a_candidates_behaviour_notes_or_says_it_cannot():
    import enum

    class Note(enum.Enum):
        CUBLASLT_DEPENDENCY = 1
        RUNTIME_COMPILATION = 2
        SUPPORTS_CUDA_GRAPH_NATIVE_API = 3

    class Plans:
        notes = {0: [Note.CUBLASLT_DEPENDENCY], 1: [Note.RUNTIME_COMPILATION, Note.SUPPORTS_CUDA_GRAPH_NATIVE_API],
                 2: []}

        def get_behavior_notes_for_plan_at_index(self, index):
            if index not in self.notes:
                raise NotImplementedError("plan 3 delegates to the backend's own choice")
            return self.notes[index]

    graph = Plans()
    assert autotune.plan_notes(graph, 0) == "CUBLASLT_DEPENDENCY"
    assert autotune.plan_notes(graph, 1) == "RUNTIME_COMPILATION, SUPPORTS_CUDA_GRAPH_NATIVE_API"
    assert autotune.plan_notes(graph, 2) == "-"
    assert autotune.plan_notes(graph, 3) == "?"


def test_results_dir_and_artifacts_dir_are_different_folders(monkeypatch):
    monkeypatch.delenv("COURSE_ARTIFACTS_DIR", raising=False)
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    from helpers.paths import artifacts_dir
    from helpers.results import results_dir

    assert artifacts_dir() == ROOT / "artifacts" != results_dir()


# ------------------------------------------------------------------ small helpers
def test_first_line_and_dtype_name():
    assert H.first_line(RuntimeError("no engine\nsecond line")) == "RuntimeError: no engine"
    assert H.first_line(ValueError("")) == "ValueError"
    assert H.first_line(RuntimeError("x" * 500), width=10) == "RuntimeError: " + "x" * 10
    assert H.dtype_name(torch.bfloat16) == "bfloat16" and H.dtype_name(torch.float8_e4m3fn) == "float8_e4m3fn"
    with pytest.raises(TypeError, match="torch.dtype"):
        H.dtype_name("bf16")


def test_datasheet_keys_are_dtype_names():
    from helpers import device

    bf16, fp16, fp8, gbps = device.datasheet_row("NVIDIA H200")
    assert (bf16, fp8, gbps) == (989.0, 1979.0, 4800.0)
    assert device.datasheet_row("Some Unknown GPU") == (None, None, None, None)


# ------------------------------------------------------------------ perf_sweep and plot_sweep (CPU parts)
def test_grid_is_the_product_of_the_axes():
    from helpers.timing.sweep import grid

    assert grid(S=[1, 2], d=[64]) == [{"S": 1, "d": 64}, {"S": 2, "d": 64}]


def test_sweep_rows_for_paths_that_cannot_run_need_no_gpu():
    df = H.perf_sweep({"S": [512, 1024]}, lambda S: {"cuDNN": f"unsupported at {S}", "torch MATH": "skipped"},
                      progress=False)
    assert list(df.columns[:3]) == ["S", "path", "status"] and len(df) == 4
    assert df.loc[(df.S == 1024) & (df.path == "cuDNN"), "status"].item() == "unsupported at 1024"


def test_sweep_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one point"):
        H.perf_sweep([], lambda: {})
    with pytest.raises(TypeError, match="paths must be a function"):
        H.perf_sweep([{"S": 1}], {"a": None})


def _table():
    import pandas as pd

    rows = []
    for s in (512, 1024, 2048):
        for path, rate in (("cuDNN frontend graph", 2.0), ("torch eager", 1.0), ("torch MATH", 0.5)):
            rows.append({"S": s, "path": path, "status": "ok" if path != "torch MATH" or s < 2048 else "skipped",
                         "TFLOP/s": rate * s})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kind", ["line", "bar"])
def test_plot_sweep_draws_one_series_per_path_in_role_colours(kind):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from helpers.plotting import COLORS

    ax = H.plot_sweep(_table(), x="S", kind=kind, peak=3000, colors={"torch MATH": "#123456"})
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["cuDNN frontend graph", "torch eager", "torch MATH"]
    if kind == "line":
        colours = {l.get_label(): to_hex(l.get_color()) for l in ax.get_lines() if not l.get_label().startswith("_")}
        assert colours["cuDNN frontend graph"] == COLORS["cudnn"] and colours["torch MATH"] == "#123456"
        math_line = [l for l in ax.get_lines() if l.get_label() == "torch MATH"][0]
        assert list(math_line.get_xdata()) == [512, 1024, 2048] and np.isnan(math_line.get_ydata()[2])  # skipped: a gap
    else:
        assert len(ax.patches) == 3 + 3 + 2
    with pytest.raises(KeyError, match="no column"):
        H.plot_sweep(_table(), x="batch")
    with pytest.raises(ValueError, match="kind must be"):
        H.plot_sweep(_table(), x="S", kind="pie")


# ------------------------------------------------------------------ workers
@pytest.mark.parametrize("module", ["plan_worker", "cache_worker", "tiny_graph"])
def test_workers_are_modules_that_import_without_a_gpu(module):
    code = f"import helpers.workers.{module} as m; print(m.__doc__.splitlines()[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Notebook 0" in out.stdout


def test_cache_worker_usage_and_plan_worker_mode_errors_are_one_line(tmp_path):
    run = H.run_worker("cache_worker", check=False, cwd=tmp_path, timeout=120)   # any folder: helpers is found
    assert run.returncode == 2 and "{conv,mlp}" in run.stderr
    run = H.run_worker("cache_worker", "mlp", "--mode", "fast", "--tokens", 8, "--hidden", 8, "--ffn", 8,
                       check=False, cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and "invalid choice: 'fast'" in run.stderr
    with pytest.raises(H.WorkerError, match=r"worker plan_worker failed \(exit 1\)") as error:
        H.run_worker("plan_worker", "rebuild", "/nonexistent", cwd=tmp_path, timeout=120)
    assert "mode must be build or load" in str(error.value)


def test_run_worker_finds_helpers_whatever_pythonpath_holds_and_refuses_a_path(tmp_path):
    with pytest.raises(ValueError, match="module name"):
        H.run_worker("../evil")
    import os
    import time

    here = str(ROOT)   # the checkout taken off PYTHONPATH (other entries kept): run_worker adds helpers' own parent
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != here]
    started = time.time()
    run = H.run_worker("cache_worker", "--help", check=False, env={"PYTHONPATH": os.pathsep.join(others)},
                       cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and "cache_worker" in run.stdout, run.stderr
    assert run.result is None and run.wall_s > 0   # --help prints no RESULT line
    assert started <= run.launched_at <= time.time() - run.wall_s + 1   # the launch clock is the launch's


def test_run_worker_parses_the_last_result_line(tmp_path, monkeypatch):
    import subprocess

    printed = 'RESULT {"a": 1}\nnoise\nRESULT {"a": 2, "ok": true}\n'
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, printed, ""))
    assert H.run_worker("cache_worker").result == {"a": 2, "ok": True}


def test_cache_worker_modes_parse_to_their_arguments():
    from helpers.workers import cache_worker

    conv = cache_worker.parse_args(["conv", "--batch", "24", "--channels", "8", "--filters", "16", "--size", "7"])
    assert (conv.graph, conv.batch, conv.filter_size, conv.cache) == ("conv", 24, 3, None)
    mlp = cache_worker.parse_args(["mlp", "--mode", "pinned", "--tokens", "128", "384", "--hidden", "64", "--ffn", "96"])
    assert (mlp.graph, mlp.mode, mlp.tokens, mlp.hidden, mlp.ffn, mlp.iters) == ("mlp", "pinned", [128, 384], 64, 96, 20)
    assert cache_worker.MLP_MODES == ("static", "heuristics", "pinned")
    with pytest.raises(ValueError, match="mode must be one of"):
        cache_worker.mlp_sweep("fast", [8], 8, 8)


def test_plan_worker_graph_kinds_construct_on_meta_tensors():
    """The worker's conv and SDPA kinds are the recipes' graphs; its matmul is made with the recipes'
    ``new_graph`` (io dtype in memory, fp32 math), so it constructs without libcudnn too."""
    from helpers.workers import plan_worker

    conv = conv_bias_relu.make_tensors(2, 8, 10, 16, dtype=torch.bfloat16, **META)
    graph, io = plan_worker.make_graph("conv", conv)
    assert _nodes(graph) == [("conv", "CONV_FPROP"), ("bias", "POINTWISE"), ("relu", "POINTWISE")]
    mm = dict(a=torch.empty(1, 64, 32, dtype=torch.bfloat16, **META), b=torch.empty(1, 32, 48, dtype=torch.bfloat16, **META),
              c=torch.empty(1, 64, 48, dtype=torch.bfloat16, **META))
    graph, io = plan_worker.make_graph("matmul", mm)
    assert _nodes(graph) == [("matmul", "MATMUL")] and list(io.uids) == ["a", "b", "c"]
    assert graph.nodes[0].compute_data_type == torch.float32  # new_graph's fp32 math
    q = torch.empty(1, 2, 64, 32, dtype=torch.bfloat16, **META)
    t = dict(q=q, k=q.clone(), v=q.clone())
    graph, io = plan_worker.make_graph("sdpa", t)
    assert _nodes(graph) == [("sdpa", "SDPA")] and t["o"].shape == q.shape and list(io.uids) == ["q", "k", "v", "o"]
    with pytest.raises(ValueError, match="unknown graph kind"):
        plan_worker.make_graph("lstm", {})


class _Plans:
    """A constructed graph as H.build sees it: three candidates, the first refuses to build."""
    names = ["eng9_declines", "eng0_k2=1", "eng3"]

    def __init__(self):
        self.calls, self.modes = [], None

    def validate(self):
        self.calls.append("validate")

    def build_operation_graph(self):
        self.calls.append("build_operation_graph")

    def create_execution_plans(self, modes):
        self.modes = list(modes)

    def get_execution_plan_count(self):
        return len(self.names)

    def build_plan_at_index(self, i):
        if i == 0:
            raise RuntimeError("cudnnGraphNotSupportedError")
        self.calls.append(f"build {i}")

    def get_plan_name_at_index(self, i):
        return self.names[i]

    def get_behavior_notes(self):
        return [cudnn.behavior_note.RUNTIME_COMPILATION]


def test_plan_worker_builds_the_first_candidate_that_builds_or_the_saved_plan_by_name():
    """Without a saved name: H.build(pick="first") with the default heuristics, the first candidate that builds
    (what build_plans' heuristics choice selects), not simply index 0. With one: that plan, among the saved modes."""
    from helpers.graphs import DEFAULT_HEURISTICS
    from helpers.workers import plan_worker

    graph = _Plans()
    assert plan_worker.build_plan(graph, {"kind": "conv"}) == 1
    assert graph.modes == H.heuristic_modes(DEFAULT_HEURISTICS) and graph.calls[-1] == "build 1"
    graph = _Plans()
    assert plan_worker.build_plan(graph, {"plan_name": "eng3", "heuristic_modes": ["B"]}) == 2
    assert graph.modes == [cudnn.heur_mode.B] and graph.calls[-1] == "build 2"
    with pytest.raises(LookupError, match="eng7"):
        plan_worker.build_plan(_Plans(), {"plan_name": "eng7", "heuristic_modes": ["A"]})
    assert plan_worker.behavior_notes(_Plans()) == ["RUNTIME_COMPILATION"]


def test_cache_worker_builds_the_mlp_with_h_build_first_or_pinned(monkeypatch):
    """build_mlp hands the build to helpers.graphs.build (the first candidate that builds, or the pinned
    configuration) and returns the index it selected."""
    from helpers.graphs import GraphIO
    from helpers.workers import cache_worker

    asked = []

    def build(graph, **options):
        asked.append(options)
        timer = H.StepTimer()
        timer.plan = 4
        return timer

    monkeypatch.setattr(cache_worker, "build", build)
    monkeypatch.setattr(GraphIO, "check_buffers", lambda self: None)   # meta tensors: nothing was inferred
    t = matmul_bias_act.make_tensors(1, 16, 32, 48, dtype=torch.bfloat16, **META)
    graph, io, index = cache_worker.build_mlp(t, dynamic=True, pin=(7, {"k": 1}))
    assert index == 4 and asked == [{"pick": "first", "pin": (7, {"k": 1})}]
    assert graph._cpp_graph_kwargs.get("is_dynamic_shape_enabled") is True and list(io.uids) == ["x", "w", "b", "y"]


# ------------------------------------------------------------------ GPU: recipes build, run and pass their checks
@requires_gpu
def test_gpu_conv_recipe_runs_and_matches_its_reference():
    t = conv_bias_relu.make_tensors(4, 32, 14, 64, dtype=H.working_dtype(), seed=0)
    graph, io = conv_bias_relu.graph(t)
    H.build(graph)
    io.check_buffers()
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    assert H.check("conv recipe", t["y"], conv_bias_relu.reference(t), quiet=True).ok


@requires_gpu
def test_gpu_matmul_recipe_and_sdpa_recipe_run():
    dtype = H.working_dtype()
    torch.backends.cuda.matmul.allow_tf32 = False
    t = matmul_bias_act.make_tensors(1, 64, 128, 96, dtype=dtype)
    graph, io = matmul_bias_act.graph(t)
    H.build(graph)
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    assert H.check("mlp recipe", t["y"], matmul_bias_act.reference(t), quiet=True).ok
    if not H.gate("sdpa"):
        pytest.skip(H.gate("sdpa").reason)
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=dtype)
    graph, io, outputs = sdpa.forward_graph(q, q.clone(), q.clone(), causal=True, attn_scale=0.125,
                                            generate_stats=False)
    H.build(graph)
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), q.float(), q.float(), is_causal=True, scale=0.125)
    assert H.check("sdpa recipe", outputs["o"], ref, quiet=True).ok


def test_check_with_poisons_runs_and_compares_without_raising():
    ref = torch.linspace(-1.0, 1.0, 64)
    out = torch.empty(64)
    check = autotune.check_with(out, ref)
    assert check(lambda: out.copy_(ref)).ok
    unwritten = check(lambda: None)            # the poison is still there: NaN everywhere
    assert not unwritten.ok and unwritten.unwritten == 64
    wrong = check(lambda: out.copy_(-ref))
    assert not wrong.ok and wrong.rel_err > 1


@requires_gpu
def test_gpu_time_plans_times_every_candidate_and_fastest_passes_its_check():
    cudnn_ = H.load_cudnn()
    t = conv_bias_relu.make_tensors(2, 32, 14, 32, dtype=H.working_dtype(), seed=1)
    ref = conv_bias_relu.reference(t)
    graph, io = conv_bias_relu.graph(t)
    graph.validate(); graph.build_operation_graph(); graph.create_execution_plans([cudnn_.heur_mode.A])
    graph.check_support()

    table = autotune.time_plans(graph, io.pack(), check=autotune.check_with(t["y"], ref), warmup=1, iters=3, max_ms=50)
    assert len(table) == graph.get_execution_plan_count() and table.attrs["timing_wall_ms"] > 0
    assert table["behavior_notes"].map(lambda notes: isinstance(notes, str) and notes != "").all()
    assert (table["behavior_notes"] != "?").any(), "the frontend gave no plan's behaviour notes"
    best = autotune.fastest(table)
    assert table.loc[best, "check"] == "PASS" and table.loc[best, "median_ms"] == table["median_ms"].min()


@requires_gpu
def test_gpu_perf_sweep_times_paths_and_records_unavailable_ones():
    a = torch.randn(256, 256, device="cuda")

    def paths(n):
        def broken():
            raise RuntimeError("backend not compiled in\nmore")
        return {"matmul": lambda: a[:n, :n] @ a[:n, :n], "broken": broken, "skipped": "not at this size"}

    df = H.perf_sweep({"n": [64, 128]}, paths, flops=lambda n: 2 * n**3, peak=100.0, warmup=1, iters=3,
                      memory=True, progress=False)
    ok = df[df.path == "matmul"]
    assert (ok.status == "ok").all() and (ok["TFLOP/s"] > 0).all() and "% of peak" in df and "peak MiB" in df
    assert df[df.path == "broken"].status.iloc[0] == "unavailable: RuntimeError: backend not compiled in"
    assert (df[df.path == "skipped"].status == "not at this size").all()


@requires_gpu
def test_gpu_workers_run_as_modules(tmp_path):
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "helpers.workers.cache_worker", "conv", "--batch", "2",
                          "--channels", "16", "--filters", "16", "--size", "8"], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)
    result = json.loads([l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])
    assert result["ok"], result["check"]
    for mode in ("static", "pinned"):
        out = subprocess.run([sys.executable, "-m", "helpers.workers.cache_worker", "mlp", "--mode", mode,
                              "--tokens", "64", "96", "--hidden", "128", "--ffn", "256", "--iters", "3"],
                             capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        result = json.loads([l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])
        assert result["ok"] and [r["tokens"] for r in result["rows"]] == [64, 96], result
        assert all(r["build_ms"] > 0 and r["call_ms"] > 0 for r in result["rows"]), result
        if mode == "pinned":
            assert result["rows"][1]["how"] == "pinned" or result["rows"][1]["how"].startswith("pin refused")
    (tmp_path / "job.json").write_text(json.dumps({"dtype": H.dtype_name(H.working_dtype()), "graphs": {
        "g0": {"kind": "conv", "shape": {"N": 2, "C": 16, "H": 8, "W": 8, "K": 16}},
        "g1": {"kind": "matmul", "shape": {"M": 64, "N": 64, "K": 64}}}}))
    for mode in ("build", "load"):
        run = subprocess.run([sys.executable, "-m", "helpers.workers.plan_worker", mode, str(tmp_path)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        report = json.loads((tmp_path / f"report-{mode}.json").read_text())
        assert all("error" not in g for g in report["graphs"].values()), report
    for name in ("g0", "g1"):
        assert torch.equal(torch.load(tmp_path / f"{name}.build.out.pt"), torch.load(tmp_path / f"{name}.load.out.pt"))


@requires_gpu
def test_gpu_plan_worker_reports_plan_and_notes_and_can_skip_outputs(tmp_path):
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    (tmp_path / "job.json").write_text(json.dumps({"dtype": H.dtype_name(H.working_dtype()), "save_outputs": False,
                                                   "graphs": {"g0": {"kind": "matmul", "shape": {"M": 64, "N": 64, "K": 64}}}}))
    for mode in ("build", "load"):
        run = subprocess.run([sys.executable, "-m", "helpers.workers.plan_worker", mode, str(tmp_path)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
    built = json.loads((tmp_path / "report-build.json").read_text())["graphs"]["g0"]
    assert built["plan"] and built["plan"] != "unknown" and isinstance(built["notes"], list), built
    assert all(n in {b.name for b in cudnn.behavior_note} for n in built["notes"]), built["notes"]
    assert json.loads((tmp_path / "report-load.json").read_text())["graphs"]["g0"]["load_ms"] > 0
    assert not list(tmp_path.glob("*.out.pt")), "save_outputs=false writes no outputs"
