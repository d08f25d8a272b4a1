"""Reference answers to notebook 06's exercises (graded by helpers/exercises/nb06.py)."""
import torch

import helpers as H
from helpers.recipes import plancache

PLAN_UIDS = dict(a=11, b=12, c=13)   # the same contract as the notebook's UIDS


def round_trip(a, b, c):
    cudnn, handle = H.load_cudnn(), H.get_handle()
    built = cudnn.pygraph(io_data_type=a.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=handle)
    a_in = built.tensor_like(a).set_uid(PLAN_UIDS["a"])
    b_in = built.tensor_like(b).set_uid(PLAN_UIDS["b"])
    built.matmul(A=a_in, B=b_in).set_output(True).set_uid(PLAN_UIDS["c"])
    H.build(built)
    blob = built.serialize(as_bytes=True)

    fresh = cudnn.pygraph(handle=handle)          # nothing in it: no tensors, no ops
    fresh.deserialize(handle, blob)
    by_uid = {PLAN_UIDS["a"]: a, PLAN_UIDS["b"]: b, PLAN_UIDS["c"]: c}
    fresh.execute(by_uid, H.workspace_for(fresh), handle=handle)
    return blob, fresh


def load_or_build(entry, graph):
    this_machine = plancache.current_fingerprint()   # every field the course's plan cache keys on
    usable = entry is not None and entry["fingerprint"] == this_machine and entry["key"] == graph.key()
    if not usable:
        H.build(graph)
        return graph
    fresh = H.load_cudnn().pygraph(handle=H.get_handle())
    fresh.deserialize(H.get_handle(), entry["plan"])
    return fresh
