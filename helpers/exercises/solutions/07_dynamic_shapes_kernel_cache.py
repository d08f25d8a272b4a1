"""Reference answers to notebook 07's exercises (graded by helpers/exercises/nb07.py)."""
import torch

import helpers as H
from helpers.recipes import conv_bias_relu


def build_projection(x, w, b, y, cache):
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(io_data_type=x.dtype, intermediate_data_type=torch.float32, compute_data_type=torch.float32,
                      handle=H.get_handle(), kernel_cache=cache, is_dynamic_shape_enabled=True)
    bound = H.GraphIO(g, dtype=x.dtype)
    xw = g.matmul(bound.input("x", x), bound.input("w", w), name="x_at_w")
    bound.output("y", g.add(xw, bound.input("b", b), name="plus_b"), y)
    H.build(g)
    return g, bound


def serve(x, w, b, graphs, cache):
    shape = tuple(x.shape)
    out = torch.empty(shape[0], w.shape[0], shape[2], shape[3], device=x.device,
                      dtype=x.dtype).to(memory_format=torch.channels_last)
    if shape not in graphs:                      # a new shape: a build, cheap once the cache holds the kernel
        made = conv_bias_relu.graph(dict(x=x, w=w, b=b, y=out), kernel_cache=cache, is_dynamic_shape_enabled=True)
        H.build(made[0])
        graphs[shape] = made
    g, bound = graphs[shape]
    g.execute(bound.pack(x=x, y=out), H.workspace_for(g), handle=H.get_handle())
    return out


def restore_cache(text):
    fresh = H.load_cudnn().create_kernel_cache()
    fresh.deserialize(text)
    return fresh
