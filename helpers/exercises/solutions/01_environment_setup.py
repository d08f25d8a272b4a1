"""Reference answers to notebook 01's exercises (graded by helpers/exercises/nb01.py)."""
import torch

import helpers as H


def matmul_bias_relu(x, w, b, y):
    """y = ReLU(x @ w + b) as one graph: three graph inputs, a virtual matmul and sum, one stored output."""
    cudnn = H.load_cudnn()
    mm_graph = cudnn.pygraph(io_data_type=x.dtype, compute_data_type=torch.float32, handle=H.get_handle())
    x_in, w_in, b_in = (mm_graph.tensor_like(t) for t in (x, w, b))
    summed = mm_graph.add(mm_graph.matmul(x_in, w_in, name="mm"), b_in, name="plus_bias")  # b broadcasts
    y_out = mm_graph.relu(summed, name="act")
    y_out.set_output(True).set_data_type(cudnn.datatypes.torch_to_cudnn_data_type(y.dtype))
    mm_graph.validate()
    mm_graph.build_operation_graph()
    mm_graph.create_execution_plans(H.heuristic_modes())   # the course's default: A, then FALLBACK
    mm_graph.check_support()
    mm_graph.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    return mm_graph, {x_in: x, w_in: w, b_in: b, y_out: y}


def run_on_stream(graph, pack, workspace, stream):
    """Ask for the course handle inside the stream context: it is bound to `stream` for this launch."""
    with torch.cuda.stream(stream):
        graph.execute(pack, workspace, handle=H.get_handle())
