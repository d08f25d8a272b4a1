"""grader/internals.py: every assumption the grader makes about the frontend's and torch's private parts holds here.

One test per row of ``internals.ASSUMPTIONS``, failing in the row's one line (library, installed version, what broke,
what grading loses); the rule that tells a torch operator that moves data from one that computes, against the list
it replaced; and the rest of ``grader/`` reaching no private name of cudnn or torch.
"""
import ast
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from grader import internals, provenance

GRADER = Path(internals.__file__).resolve().parent
cudnn = pytest.importorskip("cudnn")


@pytest.mark.parametrize("key", sorted(internals.ASSUMPTIONS))
def test_a_grading_assumption_holds(key):
    assert internals.holds(key), internals.broken(key)


def test_a_broken_assumption_is_said_in_one_line(monkeypatch):
    monkeypatch.delattr(cudnn.pygraph, "execute_plan_at_index")
    monkeypatch.delattr(torch.cuda, "_sleep")
    assert not internals.holds("graph_methods") and not internals.holds("gpu_sleep")
    assert internals.broken("gpu_sleep") == (f"torch {version('torch')}: torch.cuda has no _sleep: "
                                             "01.run_on_stream cannot hold a stream behind a GPU wait")
    assert internals.broken("graph_methods").startswith(f"nvidia-cudnn-frontend {cudnn.__version__}: pygraph does not "
                                                        "define execute, execute_plan_at_index, validate")


def test_wrapped_methods_come_back_and_a_missing_one_is_left_alone():
    class Stand:
        def run(self):
            return 1

    original = Stand.__dict__["run"]
    with pytest.raises(RuntimeError):
        with internals.wrapped([(Stand, "run", lambda f: lambda self: f(self) + 1), (Stand, "gone", None)]) as count:
            assert count == 1 and Stand().run() == 2 and Stand.run.__name__ == "run"
            raise RuntimeError("the answer failed")
    assert Stand.__dict__["run"] is original and not hasattr(Stand, "gone")


# ------------------------------------------------------------------ torch operators: data movement or compute
# The hand-kept list the rule replaced (grader/provenance.py's FREE_OPS until issue 43): every overload of each of
# these must stay free.
OLD_FREE_OPS = """
    empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like ones ones_like full
    full_like new_zeros new_ones new_full scalar_tensor fill fill_ zero_ copy copy_ _copy_from _copy_from_and_resize
    _to_copy clone contiguous lift lift_fresh lift_fresh_copy detach detach_ alias view _unsafe_view reshape
    _reshape_alias as_strided as_strided_ t transpose transpose_ permute expand expand_as unsqueeze unsqueeze_ squeeze
    squeeze_ slice select split split_with_sizes unbind narrow unfold view_as_real view_as_complex diagonal movedim
    flatten unflatten cat stack set_ resize_ resize_as_ record_stream randn rand randint randn_like rand_like
    randint_like normal normal_ uniform_ random_ bernoulli_ exponential_ arange linspace eye _local_scalar_dense
    is_nonzero _has_compatible_shallow_copy_type is_same_size equal sym_size sym_stride sym_numel
    sym_storage_offset _nested_tensor_from_mask_left_aligned
""".split()
# Compute, including operators the rule must not take for data movement: tagged nondeterministic_seeded (torch's
# attention, dropout, rrelu), results that alias their input (a lazy negation), in-place arithmetic.
COMPUTE = ["mm.default", "mul.Tensor", "mul.Scalar", "add.Tensor", "convolution.default", "_softmax.default",
           "bmm.out", "relu_.default", "mul_.Scalar", "_neg_view.default", "rrelu_.default", "rrelu_with_noise.default",
           "native_dropout.default", "_scaled_dot_product_flash_attention_for_cpu.default", "sum.dim_IntList"]


def _overloads(name):
    packet = getattr(torch.ops.aten, name)
    return [getattr(packet, overload) for overload in packet.overloads()]


@pytest.mark.parametrize("name", OLD_FREE_OPS)
def test_every_operator_of_the_old_list_is_still_data_movement(name):
    assert [f for f in _overloads(name) if not internals.op(f).free] == []


@pytest.mark.parametrize("qualified", COMPUTE)
def test_arithmetic_matmuls_convolutions_attention_are_compute(qualified):
    name, overload = qualified.split(".")
    func = getattr(getattr(torch.ops.aten, name), overload)
    assert not internals.op(func).free, f"aten.{qualified} counts as data movement"


def test_the_operators_a_grading_rule_names_exist_in_this_torch():
    named = provenance.REDUCTIONS | provenance.HEAVY | internals.COPIES | internals.OVERWRITES | internals.NOT_VIEWS
    assert [n for n in sorted(named) if not hasattr(torch.ops.aten, n)] == [], f"torch {torch.__version__}"


# ------------------------------------------------------------------ nobody else reaches a private part
def private_reaches(source: str, own: set) -> list[str]:
    """Private names (``_x``, not dunders) a module reaches that ``own`` (the grader's own private names) lacks: an
    attribute, one by name (``getattr(g, "_x")``), or a module imported."""
    def private(name):
        return name.startswith("_") and not name.endswith("__") and name not in own

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and private(node.attr):
            found.append(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "hasattr", "setattr") \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and private(str(node.args[1].value)):
            found.append(node.args[1].value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                                                      else [])
            found += [m for m in modules if any(private(part) for part in m.split("."))]
    return found


def own_private_names(sources) -> set:
    own = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
    return {n for n in own if n.startswith("_")}


def test_only_the_adapter_reaches_a_private_part_of_cudnn_or_torch():
    sources = {p.name: p.read_text() for p in sorted(GRADER.glob("*.py"))}
    own = own_private_names(sources.values())
    bad = {name: reached for name, source in sources.items() if name != "internals.py"
           for reached in [private_reaches(source, own)] if reached}
    assert not bad, f"private parts reached outside grader/internals.py: {bad}"


def test_the_private_reach_finder_finds_each_kind():
    source = ("import torch.utils._python_dispatch\nfrom cudnn._compiled_module import kernel_cache\n"
              "torch.cuda._sleep(1)\ngetattr(g, '_data_bindings')\nself._mine = 1\nself._mine\n")
    assert sorted(private_reaches(source, own_private_names([source]))) == [
        "_data_bindings", "_sleep", "cudnn._compiled_module", "torch.utils._python_dispatch"]
