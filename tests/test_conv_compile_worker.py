"""Notebook 02's conv_compile worker on the CPU: its arguments, its refusals and its RESULT line (the GPU part,
``measure``, runs in the notebook's deep dive A)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import helpers as H
from helpers.workers import RESULT_PREFIX, conv_compile

ROOT = Path(__file__).resolve().parent.parent


def test_the_defaults_are_notebook_02s_headline_shape():
    args = conv_compile.parse_args(["--cudnn-benchmark", "off"])
    assert args.cudnn_benchmark == "off"
    assert (args.n, args.c, args.hw, args.k, args.rs, args.pad, args.stride) == (32, 128, 56, 256, 3, 1, 1)
    assert (args.dtype, args.iters, args.seed) == ("bfloat16", 20, 0)


def test_every_shape_argument_parses():
    args = conv_compile.parse_args(["--cudnn-benchmark", "on", "--n", "4", "--c", "40", "--hw", "30", "--k", "54",
                                    "--rs", "1", "--pad", "0", "--stride", "2", "--dtype", "float16",
                                    "--iters", "5", "--seed", "3"])
    assert args.cudnn_benchmark == "on"
    assert (args.n, args.c, args.hw, args.k, args.rs, args.pad, args.stride) == (4, 40, 30, 54, 1, 0, 2)
    assert (args.dtype, args.iters, args.seed) == ("float16", 5, 3)


@pytest.mark.parametrize("argv, message", [
    ([], "--cudnn-benchmark"),                                         # the setting is required
    (["--cudnn-benchmark", "maybe"], "invalid choice: 'maybe'"),
    (["--cudnn-benchmark", "on", "--dtype", "float32"], "invalid choice: 'float32'"),
    (["--cudnn-benchmark", "on", "--k", "0"], "--k must be ≥ 1"),
    (["--cudnn-benchmark", "on", "--pad", "-1"], "must fit the padded image"),
    (["--cudnn-benchmark", "on", "--rs", "7", "--hw", "4", "--pad", "1"], "must fit the padded image"),
])
def test_bad_arguments_stop_with_usage(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        conv_compile.parse_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_result_line_is_the_one_run_worker_reads():
    result = {"cudnn_benchmark": True, "median_ms": 0.12, "p10_ms": 0.11, "p90_ms": 0.13, "ok": True}
    line = conv_compile.result_line(result)
    assert line.startswith(RESULT_PREFIX) and "\n" not in line
    assert json.loads(line[len(RESULT_PREFIX):]) == result


def test_the_worker_is_a_module_that_imports_without_a_gpu_and_refuses_in_one_line(tmp_path):
    code = "import helpers.workers.conv_compile as m; print(m.__doc__.splitlines()[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("Notebook 02"), out.stderr
    run = H.run_worker("conv_compile", "--cudnn-benchmark", "sometimes", check=False, cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and "invalid choice: 'sometimes'" in run.stderr and run.result is None


def test_the_workers_docstring_lists_it():
    import helpers.workers

    assert "conv_compile" in helpers.workers.__doc__
