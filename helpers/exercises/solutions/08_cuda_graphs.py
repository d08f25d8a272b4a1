"""Reference answers to notebook 08's exercises (graded by helpers/exercises/nb08.py).

capture_two: warm both cuDNN graphs up on a side stream, then record them into one CUDA graph with the
handle bound to torch's capture stream. serve: copy in, replay, copy out, once per request.
swap_weights: repoint the populated CUDA graph with update_cuda_graph, then push it into the executable one.
"""
import torch

import helpers as H


def capture_two(mlp):
    """mlp.up (x -> h), then mlp.down (h -> y), recorded into one torch.cuda.CUDAGraph."""
    cudnn = H.load_cudnn()

    def up_then_down():
        mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
        mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)

    warmup_stream = torch.cuda.Stream()
    warmup_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warmup_stream):              # one-time work stays out of the graph
        cudnn.set_stream(mlp.handle, warmup_stream.cuda_stream)
        for _ in range(2):
            up_then_down()
    torch.cuda.current_stream().wait_stream(warmup_stream)

    both = torch.cuda.CUDAGraph()
    with torch.cuda.graph(both):
        capture_stream = torch.cuda.current_stream()    # torch's capture stream, inside the block
        cudnn.set_stream(mlp.handle, capture_stream.cuda_stream)
        up_then_down()
    return both


def serve(mlp, cuda_graph, requests):
    """Each request through the captured graph; every result copied out before the next replay."""
    results = []
    for new_input in requests:
        mlp.x.copy_(new_input)            # into the address the graph reads
        cuda_graph.replay()
        results.append(mlp.y.clone())     # out of the address the next replay overwrites
    return results


def swap_weights(layer, w_new):
    """layer.cuda_graph repointed at w_new (update_cuda_graph), pushed into layer.graph_exec."""
    from cuda.bindings import runtime as cudart

    pointers = {uid: buffer.data_ptr() for uid, buffer in layer.io.pack(w=w_new).items()}
    layer.graph.update_cuda_graph(layer.handle, pointers, layer.workspace.data_ptr(), int(layer.cuda_graph))
    status, _ = cudart.cudaGraphExecUpdate(layer.graph_exec, layer.cuda_graph)
    if status == cudart.cudaError_t.cudaSuccess:
        return layer.graph_exec
    # the driver refused the in-place update: instantiate the updated graph afresh
    H.cuda_call(cudart.cudaGraphExecDestroy(layer.graph_exec))
    return H.cuda_call(cudart.cudaGraphInstantiate(layer.cuda_graph, 0))   # raises, naming the error, if refused
