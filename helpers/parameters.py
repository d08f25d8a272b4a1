"""Every notebook's parameter rules, in one place: ``RULES["05"]`` for notebook 05.

``H.check_parameters("05", globals())``, the cell right after the parameters cell, runs ``check_rules`` on them: one
``ParameterError`` lists every broken rule, each naming the parameter and what it may be; on success it prints
nothing. A rule is only as strict as the notebook's code needs: each one guards something that would crash later
or quietly measure something else. This module only checks; the ``DEEP_DIVES`` switch is ``helpers.deep_dives``'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .errors import CourseError


class ParameterError(CourseError):
    """One or more notebook parameters break their rules; ``rules`` holds the broken ones."""

    def __init__(self, message: str, rules: tuple = ()):
        super().__init__(message)
        self.rules = tuple(rules)


@dataclass(frozen=True)
class Rule:
    """``ok(*values)`` must hold for the parameters ``names``; ``message(*values)`` says what is wrong."""
    names: tuple[str, ...]
    ok: Callable[..., bool]
    message: Callable[..., str]


def must(what: str, ok: Callable, *names: str) -> list[Rule]:
    """One rule per name: ``ok(value)``, else '<name> = <value> must be <what>'."""
    return [Rule((n,), ok, lambda v, n=n: f"{n} = {v!r} must be {what}") for n in names]


def _int(low: int) -> Callable:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _number(ok: Callable) -> Callable:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and ok(v)


def ints(*names: str, low: int = 1) -> list[Rule]:
    return must(f"an int ≥ {low}", _int(low), *names)


def at_most(high: int, why: str, *names: str) -> list[Rule]:
    """An upper bound, after the rule that made the value a number (a broken value is reported once)."""
    return must(f"at most {high:,}: {why}", lambda v: v <= high, *names)


def flags(*names: str) -> list[Rule]:
    return must("True or False", lambda v: isinstance(v, bool), *names)


def positive(*names: str) -> list[Rule]:
    return must("a number > 0", _number(lambda v: v > 0), *names)


# Runs of one path at one point: the notebooks use tens to hundreds, and repeat them for every path and point.
MAX_RUNS = 10_000
RUNS_WHY = "each run is timed, for every path at every point, so the notebook would not finish; pick tens to hundreds"


def benchmark_runs(warmup: str = "WARMUP", iters: str = "ITERS") -> list[Rule]:
    """H.call_time and H.gpu_time refuse iters < 1 and warmup < 0; past MAX_RUNS the notebook would not finish."""
    return ints(warmup, low=0) + ints(iters) + at_most(MAX_RUNS, RUNS_WHY, warmup, iters)


TORCH_SEED_MAX = 2**64 - 1   # torch.manual_seed's largest seed; numpy's default_rng (07) takes any int ≥ 0


def seed() -> list[Rule]:
    return ints("SEED", low=0) + must("an int from 0 to 2**64 - 1, torch.manual_seed's range", lambda v: v <= TORCH_SEED_MAX,
                                      "SEED")


def one_of(name: str, allowed: tuple, why: str = "") -> list[Rule]:
    return must(f"one of {', '.join(map(repr, allowed))}{why}", lambda v: v in allowed, name)


def io_dtype() -> list[Rule]:
    return one_of("IO_DTYPE", (torch.bfloat16, torch.float16), " (the tensor-core dtypes these graphs keep in memory; "
                                                                "DTYPE is the one this GPU runs)")


def among(name: str, of: str, why: str = "", *, inside: bool = True) -> list[Rule]:
    """``name``'s value is an entry of the list parameter ``of`` (with ``inside=False``: is not)."""
    return [Rule((name, of), lambda v, values: (v in values) == inside,
                 lambda v, values: f"{name} = {v!r} must {'' if inside else 'not '}be one of {of} {values}{why}")]


def subset(name: str, of: str, why: str = "") -> list[Rule]:
    return [Rule((name, of), lambda v, values: set(v) <= set(values),
                 lambda v, values: f"{name} = {v} has {sorted(set(v) - set(values))}, not in {of} {values}{why}: "
                                   f"every entry must be one of those")]


def int_list(name: str, *, at_least: int = 1, increasing: bool = True, why: str = "") -> list[Rule]:
    """A list of ints ≥ 1 with ``at_least`` entries, no repeats (in increasing order if ``increasing``)."""
    def ok(v):
        return (isinstance(v, (list, tuple)) and len(v) >= at_least and all(map(_int(1), v))
                and (list(v) == sorted(set(v)) if increasing else len(set(v)) == len(v)))

    size = "a non-empty list of" if at_least == 1 else f"a list of at least {at_least}"
    return must(f"{size} ints ≥ 1, {'in increasing order, ' if increasing else ''}no repeats{why}", ok, name)


def _int_dict(v, keys: tuple) -> bool:
    return isinstance(v, dict) and sorted(v) == sorted(keys) and all(map(_int(1), v.values()))


def shape_dict(name: str, keys: tuple[str, ...]) -> list[Rule]:
    return must(f"a dict of ints ≥ 1 with the keys {', '.join(keys)}", lambda v: _int_dict(v, keys), name)


GEMM = ("batch", "M", "K", "N")


def gemm_shape(*names: str) -> list[Rule]:
    return must(f"{len(GEMM)} ints ≥ 1: ({', '.join(GEMM)})",
                lambda v: isinstance(v, (tuple, list)) and len(v) == len(GEMM) and all(map(_int(1), v)), *names)


# -- what only one notebook's rules need --------------------------------------------------------

CONV = ("N", "C", "H", "W", "K")
CONV_WHAT = "a dict of ints ≥ 1 with the keys N, C, H, W, K, and H == W (the conv recipe's images are square)"


def _conv_shape(v) -> bool:
    return _int_dict(v, CONV) and v["H"] == v["W"]


def _conv_fits(rs, hw, pad) -> bool:
    """The filter fits in the padded image: the conv has at least one output row (whatever the stride)."""
    return rs <= hw + 2 * pad


HEAD_DIM = "a multiple of 8 from 8 to 256 (the head dims cuDNN's fused attention takes)"


def _head_dim(d) -> bool:
    return d % 8 == 0 and 8 <= d <= 256


# The checks' PyTorch reference (05's attention_fp32, differentiated by autograd) holds a few B·H·S² fp32 tensors at
# once; 05 runs on GPUs from 24 GB (an L4).
CHECK_SCORES_MAX_GIB = 2.0


def _check_scores_gib(b, h, s) -> float:
    return b * h * s * s * 4 / 2**30


def _tokens_divide(tokens, *lens) -> list:
    """The sequence lengths S among ``lens`` (lists or single S) that TOKENS is not a multiple of."""
    every = {s for group in lens for s in (group if isinstance(group, (list, tuple)) else [group])}
    return sorted(s for s in every if tokens % s)


DEEP_DIVE_SEQ_LENS_05 = [1024, 4096, 8192, 16384]   # every S notebook 05's deep dives set in their own cells
GRAPHS_06 = ("conv→bias→ReLU (heuristic)", "conv→bias→ReLU (heuristic, again)",   # the graphs notebook 06's
             "SDPA causal", "matmul (plain)", "matmul (plain, again)")                  # core times, by label

# -- the rules, per notebook -------------------------------------------------------------------

RULES: dict[str, list[Rule]] = {
    "01": [*flags("DEEP_DIVES"), *ints("BATCH", "M", "K", "N"), *io_dtype(), *seed()],

    "02": [*flags("DEEP_DIVES"),
        *ints("N", "C", "HW", "K", "RS", "STRIDE"),
        *ints("PAD", low=0),
        Rule(("RS", "HW", "PAD"), _conv_fits,
             lambda rs, hw, pad: f"RS = {rs} is larger than the padded image HW + 2·PAD = {hw + 2 * pad}: "
                                 f"the conv would have no output; need RS ≤ HW + 2·PAD"),
        *io_dtype(),
        *seed(),
    ],

    "03": [*flags("DEEP_DIVES"),
        *must(CONV_WHAT, _conv_shape, "SHAPE"),
        *io_dtype(),
        *positive("MAX_MS"),
        *seed(),
    ],

    "04": [*flags("DEEP_DIVES"),
        *gemm_shape("SHAPE"),
        Rule(("SHAPE",), lambda v: v[0] == 1,
             lambda v: f"SHAPE = {v!r}: the batch must be 1 (one linear layer: the rival, cuBLASLt's fused epilogue, "
                       f"takes 2-D operands)"),
        *must("a number other than 0 and 1 (with 1 the check that catches a missing alpha cannot fail; with 0 the "
              "matmul drops out)", _number(lambda v: v not in (0, 1)), "ALPHA"),
        *io_dtype(),
        *seed(),
    ],

    "05": [*flags("DEEP_DIVES"),
        *ints("CHECK_B", "CHECK_H", "CHECK_S", "CHECK_D", "CHECK_KV_HEADS"),
        *must(HEAD_DIM, _head_dim, "CHECK_D"),
        Rule(("CHECK_S", "CHECK_B", "CHECK_H"), lambda s, b, h: _check_scores_gib(b, h, s) <= CHECK_SCORES_MAX_GIB,
             lambda s, b, h: f"CHECK_S = {s} with CHECK_B = {b}, CHECK_H = {h}: the checks' fp32 PyTorch reference "
                             f"would hold B·H·S² scores of {_check_scores_gib(b, h, s):,.1f} GiB, more than the "
                             f"{CHECK_SCORES_MAX_GIB:g} GiB of GPU memory it may take: make CHECK_S (or CHECK_B, "
                             f"CHECK_H) smaller"),
        Rule(("CHECK_H", "CHECK_KV_HEADS"), lambda h, kv: h % kv == 0,
             lambda h, kv: f"CHECK_KV_HEADS = {kv} does not divide CHECK_H = {h}: grouped-query attention shares "
                           f"each K/V head among CHECK_H / CHECK_KV_HEADS query heads"),
        *io_dtype(),
        *ints("TOKENS", "HEADS", "HEADLINE_S"),
        *int_list("SEQ_LENS"),
        *among("HEADLINE_S", "SEQ_LENS"),
        Rule(("TOKENS", "SEQ_LENS"), lambda tokens, lens: not _tokens_divide(tokens, lens, DEEP_DIVE_SEQ_LENS_05),
             lambda tokens, lens: f"TOKENS = {tokens} is not a multiple of S = "
                                  f"{_tokens_divide(tokens, lens, DEEP_DIVE_SEQ_LENS_05)}: batch = TOKENS // S "
                                  f"must be ≥ 1 and whole at every S of SEQ_LENS and the deep dives' "
                                  f"{DEEP_DIVE_SEQ_LENS_05}"),
        *seed(),
    ],

    "06": [*flags("DEEP_DIVES"),
        *must(CONV_WHAT, _conv_shape, "CONV_SHAPE"),
        *shape_dict("MATMUL_SHAPE", ("M", "N", "K")),
        *shape_dict("SDPA_SHAPE", ("B", "H", "S", "D")),
        Rule(("SDPA_SHAPE",), lambda v: _head_dim(v["D"]), lambda v: f"SDPA_SHAPE['D'] = {v['D']!r} must be {HEAD_DIM}"),
        *io_dtype(),
        *one_of("BAR_GRAPH", GRAPHS_06, " (the graphs this notebook builds)"),
        *positive("SPEEDUP_BAR", "WORKER_TIMEOUT_S"),
        *must("at least 1 (seconds): a worker process loads torch and cuDNN before it builds anything, so under 1 s "
              "it would always time out", lambda v: v >= 1, "WORKER_TIMEOUT_S"),
        *ints("REPEATS"),
        *at_most(20, "each repeat is a fresh build process and a fresh load process, seconds each; pick a few",
                 "REPEATS"),
        *seed(),
    ],

    "07": [*flags("DEEP_DIVES"),
        *int_list("BATCH_SIZES", at_least=2, why=" (the first build is compared with the later ones)"),
        *ints("C", "K", "HW", "RS"),
        *must("odd: padding RS // 2 keeps the output HW×HW only for odd filters", lambda v: v % 2 == 1, "RS"),
        *int_list("SEQ_LENS", at_least=2, why=" (the first build is compared with the later ones; "
                                              "the last is the override-shapes envelope)"),
        *ints("HIDDEN", "FFN", "WORKER_BATCH", "WARMUP_BATCH", "N_REQUESTS"),
        *among("WORKER_BATCH", "BATCH_SIZES", ": the fresh process must build a shape no sweep built", inside=False),
        *among("WARMUP_BATCH", "BATCH_SIZES", ": the warm-up builds must not build a shape the sweep times",
               inside=False),
        *int_list("BENCH_BATCHES", increasing=False),
        *subset("BENCH_BATCHES", "BATCH_SIZES", " (the speed comparison runs graphs the sweep built)"),
        *int_list("BUCKETS", why=" (a request is padded to the first bucket that fits)"),
        *subset("BUCKETS", "BATCH_SIZES", " (the serving table reads bucket build costs from the sweep)"),
        *must("a number ≥ 1 (the mean of a geometric distribution over 1, 2, ...)", _number(lambda v: v >= 1),
              "MEAN_BATCH"),
        *benchmark_runs(),
        *flags("USE_COMPILE"),
        *seed(),
    ],

    "08": [*flags("DEEP_DIVES"),
        *ints("TOKENS", "HIDDEN", "LAYERS", "SWEEP_HIDDEN", "HOST_ITERS", "COMPILE_WARMUP"),
        *at_most(MAX_RUNS, RUNS_WHY, "HOST_ITERS", "COMPILE_WARMUP"),
        *int_list("SWEEP_TOKENS", at_least=2, why=" (the speedup is quoted at its first and last entries)"),
        *benchmark_runs(),
        *flags("USE_COMPILE"),
        *seed(),
    ],
}


def check_rules(notebook: str, namespace: dict) -> None:
    """Check notebook ``notebook``'s parameters in ``namespace``: nothing when every rule holds, else one
    ``ParameterError`` listing each broken rule ('; ' between them). A missing parameter is said as such, and a rule
    about a parameter that already broke an earlier rule (its type, say) is skipped, so each problem is said once."""
    if notebook not in RULES:
        raise ParameterError(f"no parameter rules for notebook {notebook!r}; the notebooks are {', '.join(RULES)}")
    problems, broken, failed = [], set(), []
    for name in dict.fromkeys(n for rule in RULES[notebook] for n in rule.names):
        if name not in namespace:
            problems.append(f"{name} is not defined: the parameters cell must set it")
            broken.add(name)
    for rule in RULES[notebook]:
        if broken & set(rule.names):
            continue
        values = [namespace[n] for n in rule.names]
        try:
            ok = bool(rule.ok(*values))
        except Exception:  # a value the rule cannot even look at: broken too
            ok = False
        if not ok:
            try:
                problems.append(rule.message(*values))
            except Exception:
                problems.append(f"{', '.join(rule.names)} = {', '.join(map(repr, values))} break a rule")
            failed.append(rule)
            broken.add(rule.names[0])  # the rule's subject: later rules about it would repeat the problem
    if problems:
        raise ParameterError("; ".join(problems), failed)
