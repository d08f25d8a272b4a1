"""Reference answers to notebook 02's exercises (graded by helpers/exercises/nb02.py).

Each builds one cuDNN graph (3x3 convolution, padding 1, stride 1, NHWC tensors, fp32 inside) whose
epilogue does all the element-wise work, builds it, and executes it once into ``y`` (``dx`` for the backward).
"""
import torch

import helpers as H

NHWC = torch.channels_last
FP32_INSIDE = dict(intermediate_data_type=torch.float32, compute_data_type=torch.float32)


def _new_graph(dtype):
    """An empty graph: ``dtype`` in memory, fp32 for the math and for the virtual tensors between ops."""
    return H.load_cudnn().pygraph(io_data_type=dtype, handle=H.get_handle(), **FP32_INSIDE)


def _conv3x3(g, named, x, w):
    """The convolution node: x and w become graph inputs, its output stays virtual."""
    image, weight = named.input("x", x, layout=NHWC), named.input("w", w, layout=NHWC)
    return g.conv_fprop(image, weight, padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv")


def _build_and_run(g, named):
    H.build(g)
    g.execute(named.pack(), H.workspace_for(g), handle=H.get_handle())


def residual_block(x, w, b, r, y):
    """y = relu(conv(x, w) + b + r): the residual is one more graph input, added before the ReLU."""
    g = _new_graph(x.dtype)
    named = H.GraphIO(g, dtype=x.dtype)
    with_bias = g.bias(_conv3x3(g, named, x, w), named.input("b", b, layout=NHWC), name="bias")
    with_residual = g.add(with_bias, named.input("r", r, layout=NHWC), name="residual")
    named.output("y", g.relu(with_residual, name="relu"), y)
    _build_and_run(g, named)


def folded_bn(x, w, scale, shift, y):
    """y = relu(conv(x, w) * scale + shift): batch norm's per-channel affine map in the epilogue."""
    g = _new_graph(x.dtype)
    named = H.GraphIO(g, dtype=x.dtype)
    scaled = g.scale(_conv3x3(g, named, x, w), named.input("scale", scale, layout=NHWC), name="scale")
    shifted = g.bias(scaled, named.input("shift", shift, layout=NHWC), name="shift")
    named.output("y", g.relu(shifted, name="relu"), y)
    _build_and_run(g, named)


def dgrad_drelu(dy, w, x, dx):
    """dx = relu_backward(conv_dgrad(dy, w), x): the convolution's data gradient, masked in its epilogue by the
    ReLU that produced x (the gradient passes where x > 0). conv_dgrad takes w as the forward used it."""
    g = _new_graph(dy.dtype)
    named = H.GraphIO(g, dtype=dy.dtype)
    dgrad = g.conv_dgrad(named.input("dy", dy, layout=NHWC), named.input("w", w, layout=NHWC),
                         padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="dgrad")
    named.output("dx", g.relu_backward(dgrad, named.input("x", x, layout=NHWC), name="drelu"), dx)
    _build_and_run(g, named)
