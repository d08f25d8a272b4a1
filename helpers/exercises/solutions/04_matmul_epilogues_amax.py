"""Reference answers to notebook 04's exercises (``helpers.exercises.solution("04.<name>")`` loads one).

Not part of the student copy: ``tools/student.py`` leaves this folder out and drops the notebook cells that
grade these answers.
"""


def silu_amax(a, b, bias):
    """SiLU epilogue with a per-batch-entry AMAX: the reduction's output keeps dim 0 and collapses M and N."""
    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    batch, rows, _ = a.shape
    cols = b.shape[-1]
    out = torch.empty(batch, rows, cols, device=a.device, dtype=a.dtype)
    peaks = torch.zeros(batch, 1, 1, device=a.device, dtype=torch.float32)   # one max per batch entry

    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=a.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g, dtype=a.dtype)
    product = g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32, name="product")
    shifted = g.add(product, io.input("bias", bias), name="plus_bias")
    activated = g.swish(shifted, swish_beta=1.0, name="silu_node")
    io.output("y", activated, out)
    peak = g.reduction(activated, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32,
                       name="amax_per_entry")
    io.output("amax", peak, peaks)                # [batch, 1, 1]: the shape asks for one value per entry
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return out, peaks


def scaled_relu(a, b, bias, y):
    """Build relu(alpha * a @ b + bias) once with alpha as a pass-by-value scalar; run(alpha) only executes."""
    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=a.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g, dtype=a.dtype)
    scale = io.scalar("alpha", 1.0)                  # a CPU 1x1x1 fp32 tensor: its value travels per execute
    product = g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32, name="product")
    scaled = g.mul(product, scale, name="times_alpha")
    io.output("y", g.relu(g.add(scaled, io.input("bias", bias), name="plus_bias"), name="relu_node"), y)
    H.build(g)
    scratch = H.workspace_for(g)

    def run(alpha):
        by_value = torch.full((1, 1, 1), float(alpha), dtype=torch.float32)   # host tensor, no copy to the GPU
        g.execute(io.pack(alpha=by_value), scratch, handle=H.get_handle())

    return run


def fp8_matmul_amax(a8, b8, descale_a, descale_b):
    """e4m3 GEMM, both descales in the epilogue, bf16 output and its AMAX, as one graph."""
    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    batch, rows, _ = a8.shape
    cols = b8.shape[-1]
    out = torch.empty(batch, rows, cols, device=a8.device, dtype=torch.bfloat16)
    peak_buf = torch.zeros(1, 1, 1, device=a8.device, dtype=torch.float32)

    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=torch.bfloat16,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g)                                # mixed dtypes: each tensor keeps its own
    product = g.matmul(io.input("a8", a8), io.input("b8", b8), compute_data_type=torch.float32, name="fp8_product")
    undo_a = g.mul(product, io.input("descale_a", descale_a), name="undo_scale_a")
    descaled = g.mul(undo_a, io.input("descale_b", descale_b), name="undo_scale_b")
    io.output("y", descaled, out)
    io.output("amax", g.reduction(descaled, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32,
                                  name="amax_of_y"), peak_buf)
    H.build(g, heuristics=("A", "B", "FALLBACK"))
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return out, peak_buf


def rmsnorm_backward(dy, x, scale, inv_var, dx, dscale):
    """RMSNorm's backward as one graph: dx and dscale (summed over the rows) from dy, x, scale and the inv_var
    the forward saved; one execute writes both."""
    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=x.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g)                                # mixed dtypes: inv_var stays fp32
    grad_x, grad_scale, _ = g.rmsnorm_backward(grad=io.input("dy", dy), input=io.input("x", x),
                                               scale=io.input("scale", scale),
                                               inv_variance=io.input("inv_var", inv_var),   # no statistics recomputed
                                               has_dbias=False, name="rms_bwd")
    io.output("dx", grad_x, dx)
    io.output("dscale", grad_scale, dscale)          # [1, hidden, 1, 1]: the node sums over the rows
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
