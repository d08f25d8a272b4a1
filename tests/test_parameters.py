"""helpers.parameters: every notebook's rules hold for its stored parameters, and each rule catches a bad value
with a message that names the parameter and what it may be (for a membership rule, the values allowed); H.check_parameters
runs them and then the DEEP_DIVES switch, which the rules module knows nothing of."""
import ast
import enum
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from helpers import parameters
from helpers import check_parameters
from helpers.parameters import RULES, ParameterError
from tools.notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.name[:2]: p for p in notebook_paths()}
# what the setup cell defines before the parameters cell reads it
STUB_CUDNN = SimpleNamespace(heur_mode=enum.Enum("heur_mode", "A B FALLBACK"))


def _code_cells(nb: str) -> list[dict]:
    return [c for c in json.loads(NOTEBOOKS[nb].read_text())["cells"] if c["cell_type"] == "code"]


def parameters_source(nb: str) -> str:
    cells = [c for c in _code_cells(nb) if "parameters" in c["metadata"].get("tags", [])]
    assert len(cells) == 1, f"notebook {nb} has {len(cells)} parameters cells"
    return "".join(cells[0]["source"])


def defaults(nb: str, cudnn=STUB_CUDNN) -> dict:
    """The notebook's parameters as its parameters cell sets them."""
    namespace = {"torch": torch, "DTYPE": torch.bfloat16, "cudnn": cudnn}
    exec(parameters_source(nb), namespace)
    return namespace


def assigned_names(nb: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(parameters_source(nb))):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def ints(nb, *names, value=0, low=1):
    return [(nb, {n: value}, [f"{n} = {value!r}", f"int ≥ {low}"]) for n in names]


def too_many(nb, *names, high=parameters.MAX_RUNS):
    return [(nb, {n: 10**12}, [f"{n} = {10**12}", f"at most {high:,}"]) for n in names]


def seeds(nb):
    return [(nb, {"SEED": -1}, SEED_BAD), (nb, {"SEED": 2**70}, [f"SEED = {2**70}", "torch.manual_seed's range",
                                                              "0 to 2**64 - 1"])]


DTYPE_BAD = ["IO_DTYPE = torch.float32", "torch.bfloat16, torch.float16"]
SEED_BAD = ["SEED = -1", "int ≥ 0"]
S_05 = "[1024, 2048, 4096, 8192, 16384]"
SIZES_07 = "[1, 2, 4, 8, 16, 32, 64]"

# (notebook, parameters to change, substrings the message must hold): one broken rule each
BAD = [
    *[(nb, {"DEEP_DIVES": "no"}, ["DEEP_DIVES = 'no'", "True or False"]) for nb in ("01", "02", "03", "04", "05", "06",
                                                                                   "07", "08")],
    *ints("01", "BATCH", "M", "K"), ("01", {"N": 2.5}, ["N = 2.5", "int ≥ 1"]),
    ("01", {"IO_DTYPE": torch.float32}, DTYPE_BAD), *seeds("01"),

    *ints("02", "N", "HW", "K", "RS", "STRIDE"), ("02", {"C": True}, ["C = True", "int ≥ 1"]),
    *ints("02", "PAD", value=-1, low=0),
    ("02", {"RS": 9, "HW": 3}, ["RS = 9", "HW + 2·PAD = 5"]),
    ("02", {"IO_DTYPE": torch.float32}, DTYPE_BAD),
    *seeds("02"),

    ("03", {"SHAPE": dict(N=32, C=128, H=56, W=56)}, ["SHAPE = {", "N, C, H, W, K"]),
    ("03", {"SHAPE": dict(N=32, C=128, H=56, W=28, K=256)}, ["SHAPE = {", "'W': 28", "H == W"]),
    ("03", {"IO_DTYPE": torch.float32}, DTYPE_BAD),
    ("03", {"MAX_MS": 0}, ["MAX_MS = 0", "number > 0"]),
    *seeds("03"),

    ("04", {"SHAPE": (1, 8192, 1024)}, ["SHAPE = (1, 8192, 1024)", "(batch, M, K, N)"]),
    ("04", {"SHAPE": (2, 8192, 1024, 512)}, ["SHAPE = (2, 8192, 1024, 512)", "batch must be 1"]),
    ("04", {"ALPHA": 1.0}, ["ALPHA = 1.0", "other than 0 and 1"]),
    ("04", {"IO_DTYPE": torch.float32}, DTYPE_BAD),
    *seeds("04"),

    *ints("05", "CHECK_B", "CHECK_H", "CHECK_S", "CHECK_D", "CHECK_KV_HEADS"),
    ("05", {"CHECK_D": 100}, ["CHECK_D = 100", "multiple of 8 from 8 to 256"]),
    ("05", {"CHECK_KV_HEADS": 3}, ["CHECK_KV_HEADS = 3", "CHECK_H = 8"]),
    ("05", {"CHECK_S": 10**7}, ["CHECK_S = 10000000 with CHECK_B = 2, CHECK_H = 8", "fp32 PyTorch reference",
                                "5,960,464.5 GiB", "more than the 2 GiB of GPU memory", "make CHECK_S"]),
    ("05", {"IO_DTYPE": torch.float32}, DTYPE_BAD),
    *ints("05", "TOKENS", "HEADS"),
    ("05", {"HEADLINE_S": 8192.0}, ["HEADLINE_S = 8192.0", "int ≥ 1"]),
    ("05", {"SEQ_LENS": [2048, 1024, 4096, 8192, 16384]}, ["SEQ_LENS = [2048, 1024", "increasing order"]),
    ("05", {"HEADLINE_S": 3000}, ["HEADLINE_S = 3000", f"must be one of SEQ_LENS {S_05}"]),
    ("05", {"TOKENS": 24576}, ["TOKENS = 24576", "S = [16384]"]),
    ("05", {"TOKENS": 4096}, ["TOKENS = 4096", "S = [8192, 16384]", "deep dives' [1024, 4096, 8192, 16384]"]),
    *seeds("05"),

    ("06", {"CONV_SHAPE": dict(N=32, C=128, H=56, W=56)}, ["CONV_SHAPE = {", "N, C, H, W, K"]),
    ("06", {"CONV_SHAPE": dict(N=32, C=128, H=56, W=28, K=256)}, ["CONV_SHAPE = {", "'W': 28", "H == W"]),
    ("06", {"MATMUL_SHAPE": dict(M=2048, N=2048, K=0)}, ["MATMUL_SHAPE = {", "M, N, K"]),
    ("06", {"SDPA_SHAPE": dict(B=2, H=8, S=1024)}, ["SDPA_SHAPE = {", "B, H, S, D"]),
    ("06", {"SDPA_SHAPE": dict(B=2, H=8, S=1024, D=100)}, ["SDPA_SHAPE['D'] = 100", "multiple of 8"]),
    ("06", {"IO_DTYPE": torch.float32}, DTYPE_BAD),
    ("06", {"BAR_GRAPH": "SDPA"}, ["BAR_GRAPH = 'SDPA'", "'SDPA causal'", "'matmul (plain)'"]),
    ("06", {"SPEEDUP_BAR": 0}, ["SPEEDUP_BAR = 0", "number > 0"]),
    ("06", {"WORKER_TIMEOUT_S": -5}, ["WORKER_TIMEOUT_S = -5", "number > 0"]),
    ("06", {"WORKER_TIMEOUT_S": 0.001}, ["WORKER_TIMEOUT_S = 0.001 must be at least 1 (seconds)", "always time out"]),
    *ints("06", "REPEATS"), *too_many("06", "REPEATS", high=20),
    *seeds("06"),

    ("07", {"BATCH_SIZES": [8]}, ["BATCH_SIZES = [8]", "at least 2"]),
    *ints("07", "C", "K", "HW", "RS"),
    ("07", {"RS": 4}, ["RS = 4", "odd"]),
    ("07", {"SEQ_LENS": [2048, 128]}, ["SEQ_LENS = [2048, 128]", "increasing order"]),
    *ints("07", "HIDDEN", "FFN", "WORKER_BATCH", "WARMUP_BATCH", "N_REQUESTS"),
    ("07", {"WORKER_BATCH": 16}, ["WORKER_BATCH = 16", f"must not be one of BATCH_SIZES {SIZES_07}"]),
    ("07", {"WARMUP_BATCH": 2}, ["WARMUP_BATCH = 2", f"must not be one of BATCH_SIZES {SIZES_07}"]),
    ("07", {"BENCH_BATCHES": []}, ["BENCH_BATCHES = []", "non-empty list"]),
    ("07", {"BENCH_BATCHES": [8, 24]}, ["BENCH_BATCHES = [8, 24] has [24]", f"BATCH_SIZES {SIZES_07}"]),
    ("07", {"BUCKETS": [64, 8]}, ["BUCKETS = [64, 8]", "increasing order"]),
    ("07", {"BUCKETS": [8, 12]}, ["BUCKETS = [8, 12] has [12]", f"BATCH_SIZES {SIZES_07}"]),
    ("07", {"MEAN_BATCH": 0.5}, ["MEAN_BATCH = 0.5", "number ≥ 1"]),
    *ints("07", "WARMUP", value=-1, low=0), *ints("07", "ITERS"), *too_many("07", "WARMUP", "ITERS"),
    ("07", {"USE_COMPILE": "yes"}, ["USE_COMPILE = 'yes'", "True or False"]),
    *seeds("07"),

    *ints("08", "TOKENS", "HIDDEN", "LAYERS", "SWEEP_HIDDEN", "HOST_ITERS", "COMPILE_WARMUP"),
    *too_many("08", "HOST_ITERS", "COMPILE_WARMUP"),
    ("08", {"SWEEP_TOKENS": [8192, 16]}, ["SWEEP_TOKENS = [8192, 16]", "increasing order"]),
    ("08", {"SWEEP_TOKENS": [16]}, ["SWEEP_TOKENS = [16]", "at least 2", "first and last entries"]),
    *ints("08", "WARMUP", value=-1, low=0), *ints("08", "ITERS"), *too_many("08", "WARMUP", "ITERS"),
    ("08", {"USE_COMPILE": 1}, ["USE_COMPILE = 1", "True or False"]),
    *seeds("08"),
]


def broken_rules(nb: str, changes: dict) -> ParameterError:
    namespace = dict(defaults(nb), **changes)
    with pytest.raises(ParameterError) as caught:
        check_parameters(nb, namespace)
    return caught.value


def test_the_rules_module_neither_installs_the_switch_nor_imports_lesson_code():
    source = (ROOT / "helpers" / "parameters.py").read_text()
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m and ("lessons" in m or "deep_dives" in m)}, imported


def test_check_parameters_says_once_that_the_switch_is_off(monkeypatch, capsys):
    from helpers import deep_dives

    monkeypatch.setattr(deep_dives, "install", lambda: True)   # as in IPython
    check_parameters("01", dict(defaults("01"), DEEP_DIVES=False))
    assert capsys.readouterr().out == "DEEP_DIVES = False: the core only; the deep dives below do not run.\n"
    check_parameters("01", defaults("01"))
    assert capsys.readouterr().out == ""
    with pytest.raises(ParameterError):   # the rules first: a broken parameter installs nothing
        check_parameters("01", dict(defaults("01"), DEEP_DIVES=False, SEED=-1))
    assert capsys.readouterr().out == ""


def test_every_notebook_has_rules():
    assert sorted(NOTEBOOKS) == sorted(RULES) == [f"0{i}" for i in range(1, 9)]
    assert all(RULES[nb] for nb in RULES)


@pytest.mark.parametrize("nb", sorted(RULES))
def test_the_stored_parameters_pass_silently(nb, capsys):
    assert check_parameters(nb, defaults(nb)) is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("nb", sorted(RULES))
def test_every_parameter_has_a_rule_and_every_rule_reads_parameters(nb):
    read = {name for rule in RULES[nb] for name in rule.names}
    assert assigned_names(nb) - read == set(), "parameters no rule checks: add a rule to helpers/parameters.py"
    assert read - assigned_names(nb) == set(), "rules about names the parameters cell does not set"


@pytest.mark.parametrize("nb, changes, expected", BAD,
                         ids=[f"{nb}-{'+'.join(changes)}-{i}" for i, (nb, changes, _) in enumerate(BAD)])
def test_a_bad_value_breaks_one_rule_with_a_message_naming_it(nb, changes, expected):
    error = broken_rules(nb, changes)
    assert len(error.rules) == 1, str(error)
    message = str(error)
    assert "\n" not in message
    for text in expected:
        assert text in message


def test_every_rule_is_caught_by_a_bad_case():
    hit = {id(rule) for nb, changes, _ in BAD for rule in broken_rules(nb, changes).rules}
    missed = [f"{nb} rule {i} on {', '.join(rule.names)}" for nb in RULES for i, rule in enumerate(RULES[nb])
              if id(rule) not in hit]
    assert not missed, "rules without a bad case in BAD: " + "; ".join(missed)


def test_several_broken_rules_are_reported_together_on_one_line():
    error = broken_rules("05", {"HEADLINE_S": 3000, "HEADS": 0, "TOKENS": 24576})
    assert len(error.rules) == 3
    assert str(error).count("; ") == 2 and "\n" not in str(error)
    assert error._render_traceback_() == [f"ParameterError: {error}"]   # one line in Jupyter


def test_a_rule_about_a_broken_parameter_does_not_repeat_the_problem():
    error = broken_rules("05", {"SEQ_LENS": "512, 1024"})   # not a list: the rules comparing with it stay quiet
    assert [rule.names[0] for rule in error.rules] == ["SEQ_LENS"]


def test_a_missing_parameter_is_named():
    namespace = defaults("05")
    del namespace["HEADLINE_S"]
    with pytest.raises(ParameterError, match=r"^HEADLINE_S is not defined: the parameters cell must set it$"):
        check_parameters("05", namespace)


def test_an_unknown_notebook_is_a_clear_error():
    with pytest.raises(ParameterError, match=r"no parameter rules for notebook '09'; the notebooks are 01, 02"):
        check_parameters("09", {})


def test_parameter_error_is_a_course_error():
    from helpers.errors import CourseError
    assert issubclass(ParameterError, CourseError)


def test_bar_graph_choices_are_the_labels_notebook_06_builds():
    code = "".join("".join(c["source"]) for c in _code_cells("06"))
    for label in parameters.GRAPHS_06:
        assert f'"{label}"' in code, f"notebook 06 builds no graph labelled {label!r}"


def test_the_sequence_lengths_notebook_05s_deep_dives_set_are_the_ones_tokens_is_checked_against():
    found = {}
    for cell in _code_cells("05"):
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            names = [getattr(t, "id", "") for t in getattr(node, "targets", [])]
            if isinstance(node, ast.Assign) and len(names) == 1 and names[0].endswith("_SEQ_LENS"):
                try:   # a list written out; one computed from the parameters is theirs
                    found[names[0]] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    assert found, "notebook 05's deep dives set no *_SEQ_LENS"
    for name, lens in found.items():
        assert set(lens) <= set(parameters.DEEP_DIVE_SEQ_LENS_05), f"{name} = {lens}: add them to DEEP_DIVE_SEQ_LENS_05"


def test_the_seed_bound_is_torch_manual_seeds_own():
    torch.manual_seed(parameters.TORCH_SEED_MAX)
    with pytest.raises((RuntimeError, ValueError, OverflowError)):
        torch.manual_seed(parameters.TORCH_SEED_MAX + 1)
    torch.manual_seed(0)


def test_the_reference_bound_is_the_scores_the_largest_accepted_check_shape_holds():
    """The largest CHECK_S the rule accepts at the stored B, H: its fp32 B·H·S² scores fit the bound, one more does
    not; and the rule's sum is the one notebook 05's math_fits makes for 4-byte scores."""
    stored = defaults("05")
    b, h = stored["CHECK_B"], stored["CHECK_H"]
    largest = int((parameters.CHECK_SCORES_MAX_GIB * 2**30 / (4 * b * h)) ** 0.5)
    assert check_parameters("05", dict(stored, CHECK_S=largest)) is None
    assert "CHECK_S" in str(broken_rules("05", {"CHECK_S": largest + 1}))
    from helpers.lessons.attention import math_fits
    assert math_fits(b, h, largest, parameters.CHECK_SCORES_MAX_GIB, itemsize=4)
    assert not math_fits(b, h, largest + 1, parameters.CHECK_SCORES_MAX_GIB, itemsize=4)


@pytest.mark.parametrize("nb", sorted(RULES))
def test_a_check_cell_follows_the_parameters_cell_with_its_own_notebook(nb):
    """Every notebook calls check_parameters in the next code cell after its parameters cell, for itself."""
    cells = _code_cells(nb)
    calls = [i for i, c in enumerate(cells) if "check_parameters(" in "".join(c["source"])]
    index = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    assert calls == [index + 1]
    assert f'H.check_parameters("{nb}", globals())' in "".join(cells[index + 1]["source"])
