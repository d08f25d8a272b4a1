"""Reference answers to notebook 05's exercises (``helpers.exercises.solution("05.sliding_window")`` loads ``sliding_window``)."""


def sliding_window(q, k, v, o, window):
    """Causal SDPA in which query i sees keys i - window < j <= i; writes o, returns the executed graph."""
    import math

    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    swa = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                        compute_data_type=torch.float32, handle=H.get_handle())
    named = H.GraphIO(swa, dtype=q.dtype)
    out_t, _unused_stats = swa.sdpa(
        named.input("q", q), named.input("k", k), named.input("v", v),
        attn_scale=1.0 / math.sqrt(q.shape[-1]),
        generate_stats=False,
        diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,   # the band is measured from the top-left diagonal
        diagonal_band_right_bound=0,                            # nothing right of the diagonal: causal
        diagonal_band_left_bound=window,                        # and keys j > i - window only
        name="sliding_window_sdpa",
    )
    named.output("o", out_t, o)
    H.build(swa)
    swa.execute(named.pack(), H.workspace_for(swa), handle=H.get_handle())
    return swa


def merge_chunks(q, chunks, attn_scale):
    """Attention of q over K/V chunks: one SDPA forward with Stats per chunk, then the exact merge.

    Chunk c gives O_c (softmax over its own keys) and L_c = log Σ_{j in c} exp(s_j). Over all keys the
    normaliser is L = log Σ_c exp(L_c), and O = Σ_c exp(L_c - L) · O_c."""
    import torch

    import helpers as H

    cudnn = H.load_cudnn()
    chunk_outputs, chunk_lse = [], []
    for k_chunk, v_chunk in chunks:
        part = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                             compute_data_type=torch.float32, handle=H.get_handle())
        named = H.GraphIO(part, dtype=q.dtype)
        o_t, lse_t = part.sdpa(named.input("q", q), named.input("k", k_chunk), named.input("v", v_chunk),
                               attn_scale=attn_scale, generate_stats=True, name="chunk_sdpa")
        o_chunk = torch.empty_like(q)
        lse_chunk = torch.empty(*q.shape[:3], 1, device=q.device, dtype=torch.float32)
        named.output("o", o_t, o_chunk)
        named.output("stats", lse_t, lse_chunk)
        H.build(part)
        part.execute(named.pack(), H.workspace_for(part), handle=H.get_handle())
        chunk_outputs.append(o_chunk.float())
        chunk_lse.append(lse_chunk)
    lse_all = torch.logsumexp(torch.stack(chunk_lse), dim=0)
    merged = sum(torch.exp(lse_c - lse_all) * o_c for lse_c, o_c in zip(chunk_lse, chunk_outputs))
    return merged.to(q.dtype), lse_all
