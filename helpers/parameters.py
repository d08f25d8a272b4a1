"""Every notebook's parameters, checked in one place: the cell right after its ``parameters`` cell.

``H.check_parameters("05", globals())`` runs notebook 05's rules (``RULES["05"]``) and raises one
``ParameterError`` that lists every broken rule, each naming the parameter and what it may be; on
success it prints nothing. A rule is only as strict as the notebook's code needs: each one guards
something that would crash later or quietly measure something else.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .lessons.attention import math_fits
from .deep_dives import SWITCH as DEEP_DIVES_SWITCH, install as install_deep_dives
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


# -- building blocks ---------------------------------------------------------------------------

def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _ints(v, low: int = 1) -> bool:
    return all(_is_int(x) and x >= low for x in v)


def _int_at_least(low: int, *names: str) -> list[Rule]:
    return [Rule((n,), lambda v, low=low: _is_int(v) and v >= low,
                 lambda v, n=n, low=low: f"{n} = {v!r} must be an int ≥ {low}") for n in names]


def positive_int(*names: str) -> list[Rule]:
    return _int_at_least(1, *names)


def at_most(high, why: str, *names: str) -> list[Rule]:
    """An upper bound, after the rule that made the value a number (a broken value is reported once)."""
    return [Rule((n,), lambda v, high=high: v <= high,
                 lambda v, n=n, high=high: f"{n} = {v!r} is more than {high:,}: {why}") for n in names]


# Runs of one path at one point: the notebooks use tens to hundreds, and repeat them for every path and point.
MAX_RUNS = 10_000
RUNS_WHY = "each run is timed, for every path at every point, so the notebook would not finish; pick tens to hundreds"


def timing(warmup: str = "WARMUP", iters: str = "ITERS") -> list[Rule]:
    """H.benchmark / H.gpu_time refuse iters < 1 and warmup < 0; past MAX_RUNS the notebook would not finish."""
    return _int_at_least(0, warmup) + _int_at_least(1, iters) + at_most(MAX_RUNS, RUNS_WHY, warmup, iters)


def positive_number(*names: str) -> list[Rule]:
    return [Rule((n,), lambda v: _is_number(v) and v > 0, lambda v, n=n: f"{n} = {v!r} must be a number > 0")
            for n in names]


def flag(*names: str) -> list[Rule]:
    return [Rule((n,), lambda v: isinstance(v, bool), lambda v, n=n: f"{n} = {v!r} must be True or False")
            for n in names]


TORCH_SEED_MAX = 2**64 - 1   # torch.manual_seed's largest seed


def seed() -> list[Rule]:
    # numpy's default_rng (notebook 07) takes ints >= 0, torch.manual_seed ints up to 2**64 - 1
    return _int_at_least(0, "SEED") + [
        Rule(("SEED",), lambda v: v <= TORCH_SEED_MAX,
             lambda v: f"SEED = {v!r} is beyond torch.manual_seed's range: pick an int from 0 to 2**64 - 1")]


IO_DTYPES = (torch.bfloat16, torch.float16)


def io_dtype(name: str = "IO_DTYPE") -> list[Rule]:
    return [Rule((name,), lambda v: v in IO_DTYPES,
                 lambda v: f"{name} = {v!r} is not one of torch.bfloat16, torch.float16 (the tensor-core dtypes "
                           f"these graphs keep in memory; DTYPE is the one this GPU runs)")]


def one_of(name: str, allowed: tuple, why: str = "") -> list[Rule]:
    return [Rule((name,), lambda v: v in allowed,
                 lambda v: f"{name} = {v!r} is not one of {', '.join(map(repr, allowed))}{why}: pick one of those")]


def member(name: str, of: str, why: str = "") -> list[Rule]:
    """``name``'s value must be an entry of the list parameter ``of``."""
    return [Rule((name, of), lambda v, values: v in values,
                 lambda v, values: f"{name} = {v!r} is not one of {of} {values}{why}: pick one of those")]


def not_member(name: str, of: str, why: str) -> list[Rule]:
    return [Rule((name, of), lambda v, values: v not in values,
                 lambda v, values: f"{name} = {v!r} is one of {of} {values}: pick another value ({why})")]


def subset(name: str, of: str, why: str = "") -> list[Rule]:
    return [Rule((name, of), lambda v, values: set(v) <= set(values),
                 lambda v, values: f"{name} = {v} has {sorted(set(v) - set(values))}, not in {of} {values}{why}: "
                                   f"every entry must be one of those")]


def int_list(name: str, *, at_least: int = 1, increasing: bool = True, why: str = "") -> list[Rule]:
    """A list of ints >= 1 with ``at_least`` entries, no repeats (in increasing order if ``increasing``)."""
    def ok(v):
        return (isinstance(v, (list, tuple)) and len(v) >= at_least and _ints(v)
                and (list(v) == sorted(set(v)) if increasing else len(set(v)) == len(v)))

    size = "a non-empty list of" if at_least == 1 else f"a list of at least {at_least}"
    order = "in increasing order, no repeats" if increasing else "no repeats"
    return [Rule((name,), ok, lambda v: f"{name} = {v!r} must be {size} ints ≥ 1, {order}{why}")]


def shape_tuple(name: str, fields: tuple[str, ...]) -> list[Rule]:
    return [Rule((name,), lambda v: isinstance(v, (tuple, list)) and len(v) == len(fields) and _ints(v),
                 lambda v: f"{name} = {v!r} must be {len(fields)} ints ≥ 1: ({', '.join(fields)})")]


def _shape_dict_ok(v, keys) -> bool:
    return isinstance(v, dict) and sorted(v) == sorted(keys) and _ints(v.values())


def shape_dict(name: str, keys: tuple[str, ...]) -> list[Rule]:
    return [Rule((name,), lambda v: _shape_dict_ok(v, keys),
                 lambda v: f"{name} = {v!r} must be a dict of ints ≥ 1 with the keys {', '.join(keys)}")]


def square(name: str) -> list[Rule]:
    return [Rule((name,), lambda v: v["H"] == v["W"],
                 lambda v: f"{name} has H = {v['H']} and W = {v['W']}: the conv recipe's images are square, "
                           f"make H == W")]


def head_dim(name: str, key: str | None = None) -> list[Rule]:
    """cuDNN's fused attention takes head dims that are multiples of 8, up to 256."""
    get = (lambda v: v) if key is None else (lambda v: v[key])
    label = name if key is None else f"{name}[{key!r}]"
    return [Rule((name,), lambda v: get(v) % 8 == 0 and 8 <= get(v) <= 256,
                 lambda v: f"{label} = {get(v)!r} must be a multiple of 8 from 8 to 256 (the head dims cuDNN's "
                           f"fused attention takes)")]


# -- rules that only one notebook has ----------------------------------------------------------

CONV_SHAPE_KEYS = ("N", "C", "H", "W", "K")


def _conv_output_ok(rs, hw, pad) -> bool:
    """The filter fits in the padded image: the conv has at least one output row (whatever the stride)."""
    return rs <= hw + 2 * pad


def _sweep_entry_ok(entry) -> bool:
    if not (isinstance(entry, (tuple, list)) and len(entry) == 7 and isinstance(entry[0], str)):
        return False
    _, c, hw, k, rs, pad, stride = entry
    return _ints((c, hw, k, rs, stride)) and _is_int(pad) and pad >= 0 and _conv_output_ok(rs, hw, pad)


def list_of(name: str, entry_ok: Callable, empty_ok: bool, entry: str) -> list[Rule]:
    """A list whose entries all pass ``entry_ok``; the message shows the first entry that does not."""
    def ok(v):
        return isinstance(v, list) and (empty_ok or len(v) > 0) and all(map(entry_ok, v))

    def message(v):
        bad = [e for e in v if not entry_ok(e)] if isinstance(v, list) else []
        if not bad:
            return f"{name} = {v!r} must be a {'' if empty_ok else 'non-empty '}list, each entry {entry}"
        return f"{name} entry {bad[0]!r} must be {entry}"
    return [Rule((name,), ok, message)]


def _square_conv_shape(s) -> bool:
    return _shape_dict_ok(s, CONV_SHAPE_KEYS) and s["H"] == s["W"]


def _heur_modes_ok(modes) -> bool:
    return (isinstance(modes, (list, tuple)) and len(modes) > 0 and len(set(modes)) == len(modes)
            and all(type(m).__name__ == "heur_mode" for m in modes))


def _heur_modes_message(modes) -> str:
    known = next((list(type(m).__members__) for m in (modes if isinstance(modes, (list, tuple)) else [])
                  if type(m).__name__ == "heur_mode"), ["A", "B", "FALLBACK"])
    return (f"HEUR_MODES = {modes!r} must be a non-empty list of distinct cudnn.heur_mode values "
            f"({', '.join('cudnn.heur_mode.' + k for k in known)})")


def _shape_label(s: dict) -> tuple:
    return tuple(s[k] for k in CONV_SHAPE_KEYS)


def _tokens_divide(tokens, *lens) -> list:
    """The sequence lengths S among ``lens`` (lists or single S) that TOKENS is not a multiple of."""
    every = {s for group in lens for s in (group if isinstance(group, (list, tuple)) else [group])}
    return sorted(s for s in every if tokens % s)


def _off_16(shape) -> str:
    """Which of (batch, M, K, N)'s M, K, N are not multiples of 16, in words ("" if none)."""
    off = [f"{name} = {x}" for name, x in zip("MKN", shape[1:]) if x % 16]
    return f"{', '.join(off)} {'is' if len(off) == 1 else 'are'} not" if off else ""


# The checks' PyTorch reference (05's attention_fp32, differentiated by autograd) holds a few B·H·S² fp32 tensors at
# once; 05 runs on GPUs from 24 GB (an L4).
CHECK_SCORES_MAX_GIB = 2.0


def _check_scores_gib(b, h, s) -> float:
    return b * h * s * s * 4 / 2**30


FP8_ATTENTION_SEQ_LENS = [4096, 8192]   # notebook 05, section 10: FP8_SEQ_LENS, fixed in its cell
GRAPHS_06 = ("conv→bias→ReLU (heuristic)", "conv→bias→ReLU (heuristic, again)",   # the graphs notebook 06's
             "SDPA causal", "matmul (plain)", "matmul (plain, again)")                  # core times, by label
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")               # torch.compile modes without CUDA graphs

# -- the rules, per notebook -------------------------------------------------------------------

RULES: dict[str, list[Rule]] = {
    "01": [*flag("DEEP_DIVES"), *positive_int("BATCH", "M", "K", "N"), *io_dtype(), *seed()],

    "02": [*flag("DEEP_DIVES"),
        *positive_int("N", "C", "HW", "K", "RS", "STRIDE"),
        *_int_at_least(0, "PAD"),
        Rule(("RS", "HW", "PAD"), _conv_output_ok,
             lambda rs, hw, pad: f"RS = {rs} is larger than the padded image HW + 2·PAD = {hw + 2 * pad}: "
                                 f"the conv would have no output; need RS ≤ HW + 2·PAD"),
        *io_dtype(),
        *timing(),
        *one_of("COMPILE_MODE", COMPILE_MODES, " (torch.compile modes without CUDA graphs of their own: "
                                               "H.gpu_time captures the calls itself)"),
        *positive_int("SWEEP_BATCH"),
        *list_of("SWEEP", _sweep_entry_ok, False, "(layer name, C, H=W, K, filter, padding, stride) with ints ≥ 1, "
                                                   "padding ≥ 0 and filter ≤ H + 2·padding"),
        Rule(("SWEEP",), lambda v: len({e[0] for e in v}) == len(v),
             lambda v: f"SWEEP repeats a layer name ({[e[0] for e in v]}): each name is one row of the table"),
        *seed(),
    ],

    "03": [*flag("DEEP_DIVES"),
        *shape_dict("SHAPE", CONV_SHAPE_KEYS),
        *square("SHAPE"),
        *list_of("EXTRA_SHAPES", _square_conv_shape, True, "a dict like SHAPE: ints ≥ 1 for N, C, H, W, K, "
                                                            "with H == W"),
        Rule(("SHAPE", "EXTRA_SHAPES"),
             lambda s, extra: len({_shape_label(x) for x in [s, *extra]}) == 1 + len(extra),
             lambda s, extra: f"EXTRA_SHAPES = {extra} repeats a shape (or SHAPE = {s}): each shape is one row "
                              f"of the sweep table"),
        *io_dtype(),
        Rule(("HEUR_MODES",), _heur_modes_ok, _heur_modes_message),
        *timing(),
        *positive_int("SWEEP_ITERS", "TOP_K"),
        *at_most(MAX_RUNS, RUNS_WHY, "SWEEP_ITERS"),
        *positive_number("MAX_MS"),
        *shape_tuple("GEMM_SHAPE", ("batch", "M", "K", "N")),
        *positive_number("GEMM_TUNE_BUDGET_S"),
        *seed(),
    ],

    "04": [*flag("DEEP_DIVES"),
        *shape_tuple("SMALL", ("batch", "M", "K", "N")),
        *shape_tuple("LARGE", ("batch", "M", "K", "N")),
        *shape_tuple("FP8_SHAPE", ("batch", "M", "K", "N")),
        Rule(("FP8_SHAPE",), lambda v: not _off_16(v), lambda v: f"FP8_SHAPE = {v!r}: M, K and N must be multiples of "
                                                            f"16, the sizes the FP8 matmul engines take ({_off_16(v)})"),
        *positive_number("FP8_TUNE_BUDGET_S"),
        Rule(("ALPHA",), lambda v: _is_number(v) and v not in (0, 1),
             lambda v: f"ALPHA = {v!r} must be a number other than 0 and 1 (with 1 the check that catches a "
                       f"missing alpha cannot fail; with 0 the matmul drops out)"),
        *io_dtype(),
        *timing(),
        *seed(),
    ],

    "05": [*flag("DEEP_DIVES"),
        *positive_int("CHECK_B", "CHECK_H", "CHECK_S", "CHECK_D", "CHECK_KV_HEADS"),
        *head_dim("CHECK_D"),
        Rule(("CHECK_S", "CHECK_B", "CHECK_H"), lambda s, b, h: math_fits(b, h, s, CHECK_SCORES_MAX_GIB, itemsize=4),
             lambda s, b, h: f"CHECK_S = {s} with CHECK_B = {b}, CHECK_H = {h}: the checks' fp32 PyTorch reference "
                             f"would hold B·H·S² scores of {_check_scores_gib(b, h, s):,.1f} GiB, more than the "
                             f"{CHECK_SCORES_MAX_GIB:g} GiB of GPU memory it may take: make CHECK_S (or CHECK_B, "
                             f"CHECK_H) smaller"),
        Rule(("CHECK_H", "CHECK_KV_HEADS"), lambda h, kv: h % kv == 0,
             lambda h, kv: f"CHECK_KV_HEADS = {kv} does not divide CHECK_H = {h}: grouped-query attention shares "
                           f"each K/V head among CHECK_H / CHECK_KV_HEADS query heads"),
        *io_dtype(),
        *positive_int("TOKENS", "BENCH_HEADS", "HEADLINE_S", "GAP_FWD_S", "GAP_BWD_S", "GAP_ROUNDS"),
        *at_most(100, "each round times both paths ITERS times at two points; pick a few", "GAP_ROUNDS"),
        *int_list("SEQ_LENS"), *int_list("OTHER_SEQ_LENS"), *int_list("BWD_SEQ_LENS"),
        *int_list("FLEX_SEQ_LENS", why=" (its first S is the shortest FlexAttention runs)"),
        *member("HEADLINE_S", "SEQ_LENS"),
        *member("HEADLINE_S", "BWD_SEQ_LENS", " (the backward is quoted at HEADLINE_S too)"),
        Rule(("HEADLINE_S",), lambda v: v >= 1024,
             lambda v: f"HEADLINE_S = {v} must be ≥ 1024: the comparison with torch's flash backend is made "
                       f"for S ≥ 1024"),
        *subset("FLEX_SEQ_LENS", "SEQ_LENS", " (FlexAttention runs inside the headline sweep)"),
        *member("GAP_FWD_S", "SEQ_LENS", " (it re-measures a point of the forward sweep)"),
        *member("GAP_BWD_S", "BWD_SEQ_LENS", " (it re-measures a point of the backward sweep)"),
        Rule(("TOKENS", "SEQ_LENS", "OTHER_SEQ_LENS", "BWD_SEQ_LENS"),
             lambda tokens, *lens: not _tokens_divide(tokens, *lens, FP8_ATTENTION_SEQ_LENS),
             lambda tokens, *lens: f"TOKENS = {tokens} is not a multiple of S = "
                                   f"{_tokens_divide(tokens, *lens, FP8_ATTENTION_SEQ_LENS)}: batch = TOKENS // S "
                                   f"must be ≥ 1 and whole at every S of SEQ_LENS, OTHER_SEQ_LENS, BWD_SEQ_LENS "
                                   f"and the FP8 sweep's {FP8_ATTENTION_SEQ_LENS}"),
        *timing(),
        *timing("BWD_WARMUP", "BWD_ITERS"),
        Rule(("MATH_MAX_SCORES_GIB",), lambda v: _is_number(v) and v >= 0,
             lambda v: f"MATH_MAX_SCORES_GIB = {v!r} must be a number ≥ 0 (0 skips torch's math backend everywhere)"),
        *seed(),
    ],

    "06": [*flag("DEEP_DIVES"),
        *shape_dict("CONV_SHAPE", CONV_SHAPE_KEYS),
        *square("CONV_SHAPE"),
        *shape_dict("MATMUL_SHAPE", ("M", "N", "K")),
        *shape_dict("SDPA_SHAPE", ("B", "H", "S", "D")),
        *head_dim("SDPA_SHAPE", "D"),
        *io_dtype(),
        *one_of("BAR_GRAPH", GRAPHS_06, " (the graphs this notebook builds)"),
        *positive_number("SPEEDUP_BAR", "WORKER_TIMEOUT_S"),
        Rule(("WORKER_TIMEOUT_S",), lambda v: v >= 1,
             lambda v: f"WORKER_TIMEOUT_S = {v!r} is under 1 s: a worker process loads torch and cuDNN before it "
                       f"builds anything, so it would always time out; give it at least 1 (seconds)"),
        *positive_int("REPEATS"),
        *at_most(20, "each repeat is a fresh build process and a fresh load process, seconds each; pick a few",
                 "REPEATS"),
        *seed(),
    ],

    "07": [*flag("DEEP_DIVES"),
        *int_list("BATCH_SIZES", at_least=2, why=" (the first build is compared with the later ones)"),
        *positive_int("C", "K", "HW", "RS"),
        Rule(("RS",), lambda v: v % 2 == 1,
             lambda v: f"RS = {v} must be odd: padding RS // 2 keeps the output HW×HW only for odd filters"),
        *int_list("SEQ_LENS", at_least=2, why=" (the first build is compared with the later ones; "
                                              "the last is the override-shapes envelope)"),
        *positive_int("HIDDEN", "FFN", "WORKER_BATCH", "WARMUP_BATCH", "N_REQUESTS"),
        *not_member("WORKER_BATCH", "BATCH_SIZES", "the fresh process must build a shape no sweep built"),
        *not_member("WARMUP_BATCH", "BATCH_SIZES", "the warm-up builds must not build a shape the sweep times"),
        *int_list("BENCH_BATCHES", increasing=False),
        *subset("BENCH_BATCHES", "BATCH_SIZES", " (the speed comparison runs graphs the sweep built)"),
        *int_list("BUCKETS", why=" (a request is padded to the first bucket that fits)"),
        *subset("BUCKETS", "BATCH_SIZES", " (the serving table reads bucket build costs from the sweep)"),
        Rule(("MEAN_BATCH",), lambda v: _is_number(v) and v >= 1,
             lambda v: f"MEAN_BATCH = {v!r} must be a number ≥ 1 (the mean of a geometric distribution "
                       f"over 1, 2, ...)"),
        *timing(),
        *flag("USE_COMPILE"),
        *seed(),
    ],

    "08": [*flag("DEEP_DIVES"),
        *positive_int("TOKENS", "HIDDEN", "LAYERS", "SWEEP_HIDDEN", "HOST_ITERS", "COMPILE_WARMUP"),
        *at_most(MAX_RUNS, RUNS_WHY, "HOST_ITERS", "COMPILE_WARMUP"),
        *int_list("SWEEP_TOKENS", at_least=2, why=" (the speedup is quoted at its first and last entries)"),
        *timing(),
        *flag("USE_COMPILE"),
        *seed(),
    ],
}


def check_parameters(notebook: str, namespace: dict) -> None:
    """Check notebook ``notebook``'s parameters in ``namespace`` (the notebook passes ``globals()``).

    Prints nothing when every rule holds; otherwise raises one ``ParameterError`` listing each broken
    rule ('; ' between them). A missing parameter is reported as such, and a rule about a parameter
    that already broke an earlier rule (its type, say) is skipped, so each problem is said once.
    """
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
    if install_deep_dives() and namespace.get(DEEP_DIVES_SWITCH) is False:
        print(f"{DEEP_DIVES_SWITCH} = False: the core only. Each deep-dive cell prints one line and is skipped.")
