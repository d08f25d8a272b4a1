"""A small transformer block and its training step: the test bench on which notebook 08's capstone trains
the same model with two attention implementations and compares the loss curves, step by step.

Plain PyTorch, no cuDNN: the attention under test is handed in as a function ``attention(q, k, v) -> O``.
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    """Pre-norm transformer block: x + out(attention(q, k, v)), then x + MLP(x); ``attention`` maps q, k, v
    ([B, H, S, D] views of [B, S, H, D] storage) to O of the same shape."""

    def __init__(self, dim: int, heads: int, attention: Callable):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (torch.nn.Linear(dim, dim) for _ in range(4))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, s, dim = x.shape
        h = self.norm1(x)
        q, k, v = [proj(h).view(b, s, self.heads, -1).transpose(1, 2)    # [B, H, S, D] views of [B, S, H, D]
                   for proj in (self.q_proj, self.k_proj, self.v_proj)]
        attn = self.attention(q, k, v)                    # [B, H, S, D], stored as [B, S, H, D] like q
        x = x + self.out_proj(attn.transpose(1, 2).reshape(b, s, dim))
        return x + self.mlp(self.norm2(x))


def with_attention(model: Block, attention: Callable) -> Block:
    """A copy of ``model`` (same weights) that attends with ``attention``."""
    twin = copy.deepcopy(model)
    twin.attention = attention
    return twin


def mse_loss(model, x, target):
    """Mean-squared error of ``model(x)`` against ``target``, in fp32."""
    return F.mse_loss(model(x).float(), target)


def _step(model, optimizer, x, target, loss_fn: Callable, *, free_grads: bool) -> Callable:
    def step():
        optimizer.zero_grad(set_to_none=free_grads)
        loss = loss_fn(model, x, target)
        loss.backward()
        optimizer.step()
        return loss
    return step


def train_step(model, x, target, *, lr: float, loss_fn: Callable = mse_loss) -> Callable:
    """One training step (forward, backward, AdamW with learning rate ``lr``) on the batch ``x`` as a function
    of no arguments; it returns the loss tensor (no sync)."""
    return _step(model, torch.optim.AdamW(model.parameters(), lr=lr), x, target, loss_fn, free_grads=True)


def captured_step(model, x, target, *, lr: float, loss_fn: Callable = mse_loss, warmup: int = 3):
    """The same training step recorded once as a CUDA graph: returns ``(replay, loss)``, where ``replay()`` runs
    forward, backward and AdamW again on whatever ``x`` and ``target`` hold, and ``loss`` is the static tensor the
    graph writes the loss into.

    Torch's recipe for whole-step capture: AdamW with ``capturable=True`` (its step count stays on the GPU),
    ``warmup`` steps on a side stream first (they allocate the gradients and the optimizer state, and let every
    op build what it caches, such as a cuDNN plan, outside the capture), gradients zeroed rather than freed, and
    the step recorded on torch's capture stream. Each ``replay()`` is one more training step of ``model``.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, capturable=True)
    # gradients zeroed, not freed: the graph owns their addresses
    step = _step(model, optimizer, x, target, loss_fn, free_grads=False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()

    def replay():
        graph.replay()
        return loss
    replay.keeps_alive = (model, optimizer)   # the graph reads and writes their memory by address: keep it
    return replay, loss


def loss_gap(curve, reference) -> float:
    """Largest per-step relative difference between two loss curves."""
    if len(curve) != len(reference) or not len(curve):
        raise ValueError(f"need two curves of one non-zero length, got {len(curve)} and {len(reference)} steps")
    return max(abs(a - b) / abs(b) for a, b in zip(curve, reference))
