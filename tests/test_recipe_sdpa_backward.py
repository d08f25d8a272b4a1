"""helpers.recipes.sdpa.backward_graph: the SDPA backward graph notebook 05 teaches, as a recipe (notebook 08 wraps
it in a PyTorch custom op).

On CPU the graph is constructed from meta tensors (construction works without a GPU up to validate()); the GPU
test builds it and compares dQ, dK, dV with torch autograd."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import helpers as H
from helpers.recipes import sdpa
from tests.support import requires_gpu

cudnn = pytest.importorskip("cudnn")
META = dict(device="meta", dtype=torch.bfloat16)


def _forward_buffers(b, h, h_kv, s, d, *, layout="BHSD", **like):
    """q, k, v, o, dO and stats as the backward receives them (k, v with h_kv heads)."""
    def one(heads):
        if layout == "BSHD":
            return torch.empty(b, s, heads, d, **like).transpose(1, 2)
        return torch.empty(b, heads, s, d, **like)
    q, k, v = one(h), one(h_kv), one(h_kv)
    o, do = torch.empty_like(q), torch.empty_like(q)
    stats = torch.empty(b, h, s, 1, device=q.device, dtype=torch.float32)
    return q, k, v, o, do, stats


def test_backward_graph_is_one_causal_sdpa_backward_node_with_named_tensors():
    q, k, v, o, do, stats = _forward_buffers(2, 8, 8, 128, 64, **META)
    graph, io, outputs = sdpa.backward_graph(q, k, v, o, do, stats, causal=True, attn_scale=0.125)
    assert [(n.name, n.node_type.name) for n in graph.nodes] == [("sdpa_backward", "SDPA_BWD")]
    node = graph.nodes[0]
    assert str(node.params["diagonal_alignment"]).endswith("TOP_LEFT") and node.params["diagonal_band_right_bound"] == 0
    assert node.params["attn_scale"] == 0.125
    assert list(io.uids) == ["q", "k", "v", "o", "dO", "stats", "dq", "dk", "dv"]
    assert list(io.uids.values()) == list(range(1, 10))          # stable UIDs, in the order above
    assert list(outputs) == ["dq", "dk", "dv"]


def test_backward_graph_without_a_mask_sets_no_diagonal_band():
    q, k, v, o, do, stats = _forward_buffers(1, 2, 2, 64, 32, **META)
    graph, _, _ = sdpa.backward_graph(q, k, v, o, do, stats, causal=False, attn_scale=0.5)
    assert graph.nodes[0].params.get("diagonal_band_right_bound") is None


def test_backward_outputs_follow_their_inputs_layouts_and_heads_for_gqa():
    q, k, v, o, do, stats = _forward_buffers(2, 8, 2, 128, 64, layout="BSHD", **META)
    graph, io, outputs = sdpa.backward_graph(q, k, v, o, do, stats, causal=True, attn_scale=0.125)
    for name, like in [("dq", q), ("dk", k), ("dv", v)]:
        buf = outputs[name]
        assert buf.shape == like.shape and buf.stride() == like.stride() and buf.dtype == like.dtype
        gt = graph.find_tensor(io.uids[name])
        assert list(gt.dim) == list(like.shape) and list(gt.stride) == list(like.stride())
    assert outputs["dk"].shape == (2, 2, 128, 64)                 # one gradient per K/V head


def test_backward_graph_rejects_stats_that_are_not_fp32():
    q, k, v, o, do, _ = _forward_buffers(1, 2, 2, 64, 32, **META)
    with pytest.raises(TypeError, match="stats: dtype is torch.bfloat16"):
        sdpa.backward_graph(q, k, v, o, do, torch.empty(1, 2, 64, 1, **META), causal=True, attn_scale=0.5)


def test_forward_and_backward_recipes_agree_on_the_buffers_they_share():
    """The forward's outputs (o, stats) are valid backward inputs as they are."""
    q = torch.empty(1, 4, 128, 64, **META)
    _, _, fwd = sdpa.forward_graph(q, q.clone(), q.clone(), causal=True, attn_scale=0.125, generate_stats=True)
    graph, io, _ = sdpa.backward_graph(q, q.clone(), q.clone(), fwd["o"], torch.empty_like(fwd["o"]), fwd["stats"],
                                       causal=True, attn_scale=0.125)
    assert io.buffers["stats"] is fwd["stats"] and io.buffers["o"] is fwd["o"]


@requires_gpu
def test_gpu_backward_recipe_matches_torch_autograd():
    if not H.gate("sdpa"):
        pytest.skip(H.gate("sdpa").reason)
    dtype = H.working_dtype()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    b, h, s, d = 1, 2, 128, 64
    scale = 1 / math.sqrt(d)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    graph, io, fwd = sdpa.forward_graph(q, k, v, causal=True, attn_scale=scale, generate_stats=True)
    H.build(graph)
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    do = torch.randn_like(q)
    graph, io, grads = sdpa.backward_graph(q, k, v, fwd["o"], do, fwd["stats"], causal=True, attn_scale=scale)
    H.build(graph)
    io.check_buffers()
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()

    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):   # the fp32 reference: plain matmuls and softmax
        ref = F.scaled_dot_product_attention(*leaves, is_causal=True, scale=scale)
        ref.backward(do.float())
        unmasked = [t.detach().float().requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*unmasked, is_causal=False, scale=scale).backward(do.float())
    for name, leaf in zip(("dq", "dk", "dv"), leaves):
        assert H.check(f"backward recipe {name}", grads[name], leaf.grad, quiet=True).ok, name
    assert not H.check("causal dq vs a non-causal reference", grads["dq"], unmasked[0].grad, quiet=True,
                       raise_on_fail=False).ok
