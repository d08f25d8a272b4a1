"""helpers.lessons.transformer (notebook 08's capstone bench) on CPU: the block, its training step, the loss gap, the plot."""
import matplotlib

matplotlib.use("Agg")

import pytest
import torch
import torch.nn.functional as F

from helpers.lessons import transformer
from tests.support import requires_gpu


def torch_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_the_block_keeps_the_shape_and_hands_attention_bhsd_views():
    seen = []

    def attention(q, k, v):
        seen.append((tuple(q.shape), q.transpose(1, 2).is_contiguous()))
        return torch_attention(q, k, v)

    block = transformer.Block(32, 4, attention)
    assert block(torch.randn(2, 5, 32)).shape == (2, 5, 32)
    assert seen == [((2, 4, 5, 8), True)]   # [B, H, S, D] views of [B, S, H, D] storage


def test_with_attention_copies_the_weights_and_swaps_the_attention():
    torch.manual_seed(0)
    initial = transformer.Block(16, 2, torch_attention)
    twin = transformer.with_attention(initial, lambda q, k, v: torch_attention(q, k, v) * 0)
    assert initial.attention is torch_attention
    assert all(torch.equal(a, b) and a is not b for a, b in zip(initial.parameters(), twin.parameters()))
    x = torch.randn(1, 3, 16)
    assert not torch.allclose(initial(x), twin(x))


def test_train_step_lowers_the_loss_and_returns_it_without_touching_the_original():
    torch.manual_seed(0)
    initial = transformer.Block(16, 2, torch_attention)
    x, target = torch.randn(2, 4, 16), torch.randn(2, 4, 16)
    before = [p.detach().clone() for p in initial.parameters()]
    step = transformer.train_step(transformer.with_attention(initial, torch_attention), x, target, lr=1e-2)
    losses = [step().item() for _ in range(5)]
    assert losses[-1] < losses[0]
    assert losses[0] == pytest.approx(transformer.mse_loss(initial, x, target).item())
    assert all(torch.equal(a, b) for a, b in zip(before, initial.parameters()))


def test_loss_gap_is_the_largest_relative_difference_per_step():
    assert transformer.loss_gap([1.0, 2.2, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(0.1)
    assert transformer.loss_gap([0.5], [0.5]) == 0
    with pytest.raises(ValueError, match="one non-zero length"):
        transformer.loss_gap([1.0], [1.0, 2.0])


@requires_gpu
def test_captured_step_replays_the_eager_training_step():
    """The captured step is the eager step: same weights, same data -> the same losses, step after step."""
    torch.manual_seed(0)
    initial = transformer.Block(64, 4, torch_attention).cuda()
    x, target = torch.randn(2, 16, 64, device="cuda"), torch.randn(2, 16, 64, device="cuda")
    eager = transformer.train_step(transformer.with_attention(initial, torch_attention), x, target, lr=1e-3)
    eager_losses = [eager().item() for _ in range(6)]
    replay, loss = transformer.captured_step(transformer.with_attention(initial, torch_attention), x, target, lr=1e-3,
                                          warmup=3)
    graphed = []
    for _ in range(3):   # the warm-up ran steps 1-3; each replay is the next step
        replay()
        graphed.append(loss.item())
    assert graphed == pytest.approx(eager_losses[3:], rel=1e-4)
