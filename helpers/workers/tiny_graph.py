"""Notebook 01's worker: build (and run) the smallest graph, ReLU of a 1×64×64 tensor, in a fresh process.

    CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=frontend.log python -m helpers.workers.tiny_graph

The frontend reads its logging variables once, at its first log call, so a notebook that has already
used cuDNN cannot switch logging on for itself: it starts this process with them set instead
(``H.run_worker("tiny_graph", env={...})``).
"""
import torch

import helpers as H
from helpers.graphs import GraphIO, build


def main() -> None:
    cudnn = H.load_cudnn()
    x = torch.randn(1, 64, 64, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    graph = cudnn.pygraph(io_data_type=torch.float16, compute_data_type=torch.float32, handle=H.get_handle())
    io = GraphIO(graph)
    io.output("Y", graph.relu(io.input("X", x), name="relu"), y)
    build(graph)
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    print("tiny graph built and run")


if __name__ == "__main__":
    main()
