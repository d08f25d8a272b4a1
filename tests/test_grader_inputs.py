"""grader/inputs.py makes what the lesson recipes made for the same arguments: the same bits, the same graphs.

The checkers stopped importing the recipes (issue 43) so that a changed lesson cannot change what a grader accepts;
their inputs must still be bit-identical to what the stored notebooks' runs graded, so each maker is compared here,
on the CPU, with the recipe it replaced. A recipe changed on purpose fails here, and the checker's maker decides.
"""
from types import SimpleNamespace

import pytest
import torch

from grader import inputs, internals, nb03
from helpers.recipes import autotune, conv_backward, conv_bias_relu, matmul_bias_act, norms, plancache

cudnn = pytest.importorskip("cudnn")
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def same_bits(ours: dict, theirs: dict) -> None:
    for name, tensor in ours.items():
        other = theirs[name]
        assert (tensor.dtype, tensor.shape, tensor.stride()) == (other.dtype, other.shape, other.stride()), name
        assert torch.equal(*(t.contiguous().reshape(-1).view(torch.uint8) for t in (tensor, other))), name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", [2, 11, None])
def test_conv_tensors_are_the_conv_recipes(dtype, seed):
    for shape in [dict(n=8, c=64, hw=28, k=64), dict(n=3, c=16, hw=8, k=16, rs=1, pad=0, stride=2)]:
        torch.manual_seed(0)
        ours = inputs.conv_tensors(**shape, dtype=dtype, seed=seed, device="cpu")
        torch.manual_seed(0)
        same_bits(ours, conv_bias_relu.make_tensors(**shape, dtype=dtype, seed=seed, device="cpu"))
        assert list(ours) == ["x", "w", "b", "y"]
        assert torch.equal(inputs.conv_reference(ours), conv_bias_relu.reference(ours))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dgrad_tensors_are_the_conv_backward_recipes(dtype):
    ours = inputs.dgrad_tensors(n=8, c=64, hw=28, k=32, dtype=dtype, seed=2, device="cpu")
    assert list(ours) == ["dy", "w", "x", "dx"]
    same_bits(ours, conv_backward.make_tensors(n=8, c=64, hw=28, k=32, dtype=dtype, seed=2, device="cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_tensors_and_reference_are_the_norms_recipes(dtype):
    ours = inputs.norm_tensors(256, 1024, dtype=dtype, seed=4, device="cpu")
    theirs = norms.make_tensors(256, 1024, dtype=dtype, seed=4, device="cpu")
    same_bits(ours, theirs)
    ours["x"] = ours["x"] - ours["x"].float().mean()   # as 04's checker changes x and dy before its reference
    reference = norms.rms_reference(dict(theirs, x=ours["x"]))
    same_bits(inputs.rms_reference(ours), {name: reference[name] for name in ("inv_var", "dx", "dscale")})


def describe(graph) -> tuple:
    """A constructed graph as the frontend shows it: its nodes with their tensors and parameters, every tensor's
    UID, shape, strides and dtype, and the options it was made with."""
    tensors = sorted((t.uid, name, tuple(t.get_dim()), tuple(t.get_stride()), str(t.get_data_type()), t.is_virtual)
                     for name, t in graph.tensors.items())
    return repr(graph.inspect()), tensors, internals.graph_options(graph)


def test_conv_graphs_are_the_conv_recipes():
    t = conv_bias_relu.make_tensors(2, 16, 8, 16, dtype=torch.bfloat16, device="meta")
    cache = object()
    assert describe(inputs.conv_graph(t)[0]) == describe(conv_bias_relu.graph(t)[0])
    assert describe(inputs.conv_graph(t, kernel_cache=cache, is_dynamic_shape_enabled=True)[0]) == describe(
        conv_bias_relu.graph(t, kernel_cache=cache, is_dynamic_shape_enabled=True)[0])


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_matmul_graphs_are_the_matmul_bias_act_recipes(act):
    t = matmul_bias_act.make_tensors(1, 16, 64, 128, dtype=torch.bfloat16, device="meta")
    handle = cudnn.Handle(None, 0, 0)
    ours, theirs = inputs.matmul_graph(t, act=act, handle=handle)[0], matmul_bias_act.graph(t, act=act, handle=handle)[0]
    assert describe(ours) == describe(theirs) and internals.graph_handle(ours) is handle


def test_the_fingerprint_is_the_plan_caches(monkeypatch):
    """Both read the same device facts (stubbed here: they need a GPU) into the same fields."""
    import helpers.device
    import helpers.libcudnn

    device = SimpleNamespace(name="NVIDIA H200", sm_version=90, sm_count=132)
    frontend = SimpleNamespace(backend_version=lambda: 91900, __version__="1.32.0")
    for module in (helpers.device, inputs):
        monkeypatch.setattr(module, "require_gpu", lambda: device)
        monkeypatch.setattr(module, "versions", lambda: {"driver": "580.95.05", "cuda (torch build)": "13.0"})
    for module in (helpers.libcudnn, inputs):
        monkeypatch.setattr(module, "load_cudnn", lambda **_: frontend)
    assert inputs.fingerprint() == plancache.current_fingerprint()
    assert list(inputs.fingerprint()) == list(plancache.FINGERPRINT_FIELDS)


def test_the_checkers_plan_timing_is_the_autotune_recipes(monkeypatch):
    """03's checker times plans as notebook 03 does: on a stand-in graph (plan 1 refused, plan 2 wrong, plan 3 slow
    and cut off, benchmark stubbed), the same rows in the columns the checker reads."""
    from helpers.timing.per_call import Timing

    out, ref = torch.zeros(4), torch.ones(4, dtype=torch.float64)
    medians = {0: 0.02, 2: 0.03, 3: 9.0}

    class Graph:
        def get_execution_plan_count(self):
            return 4

        def get_plan_name_at_index(self, i):
            return f"eng{i}"

        def get_behavior_notes_for_plan_at_index(self, i):
            return []

        def get_workspace_size_plan_at_index(self, i):
            return 0

        def build_plan_at_index(self, i):
            if i == 1:
                raise RuntimeError("cudnnGraphNotSupportedError: refused")

        def execute_plan_at_index(self, pack, workspace, index, handle):
            out.fill_(2.0 if index == 2 else 1.0)
            self.last = index

    graph = Graph()

    def benchmark(run, **kwargs):
        run()
        ms = medians[graph.last]
        return Timing(ms, ms, ms, 1, [ms], cut_off=ms > kwargs["max_ms"])

    for module, timer in ((nb03, "benchmark"), (autotune, "call_time")):
        monkeypatch.setattr(module, timer, benchmark)
        monkeypatch.setattr(module, "workspace_for", lambda graph, plan=None: None)
        monkeypatch.setattr(module, "get_handle", lambda: None)
    ours = nb03.time_plans(graph, {}, out, ref)
    theirs = autotune.time_plans(graph, {}, check=autotune.check_with(out, ref), warmup=3, iters=15, max_ms=nb03.MAX_MS)
    columns = ["name", "result", "check", "rel_err", "median_ms"]
    assert ours[columns].equals(theirs[columns]), (ours[columns], theirs[columns])
    assert list(ours["result"]) == ["timed", "build failed: RuntimeError: cudnnGraphNotSupportedError: refused", "timed", "cut off"]
