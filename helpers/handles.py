"""The course's cuDNN handles: one per device, bound to the stream torch runs on."""
from __future__ import annotations

import torch

from .device import require_gpu
from .libcudnn import load_cudnn

_handles: dict = {}


def get_handle():
    """One ``cudnn.Handle`` per device, bound to torch's *current* stream.

    The course's one convention: ask for the handle on the stream you are about to
    run on — ``graph.execute(pack, workspace, handle=H.get_handle())`` for a single
    call; once, right before the loop, for a timed loop or a ``torch.cuda.graph``
    capture (the stream does not change inside it). Binding is what keeps cuDNN
    work on the stream torch runs or captures; a handle bound earlier to another
    stream gives an empty CUDA graph.
    """
    require_gpu()
    cudnn = load_cudnn()
    index = torch.cuda.current_device()
    handle = _handles.get(index)
    if handle is None:
        with torch.cuda.device(index):
            handle = _handles[index] = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream(index).cuda_stream)
    return handle
