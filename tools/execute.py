"""Execute the course notebooks headlessly on the GPU, stamp them, print a summary.

    python -m tools.execute                  # every notebook in notebooks/, in place
    python -m tools.execute notebooks/02_*.ipynb --jobs 2 --output-dir out/
    python -m tools.execute --core --output-dir out/core   # DEEP_DIVES = False: each core runs alone

The log stays short: one line per notebook, then the headline numbers grouped by notebook.
What the kernels print to their own stderr (start-up and shutdown noise) and the client's
warnings go to ``.scratch/kernel-logs/<notebook>.log``.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import logging
import multiprocessing
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = ROOT / ".scratch" / "kernel-logs"
# ipykernel's own inline backend: figures are stored in the notebook whatever the caller's MPLBACKEND
# (a kernel started with MPLBACKEND=Agg stores no figures at all).
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# Appended to the executed copy, read back and removed: the kernel's peak GPU memory goes into the stamp.
PEAK_MEMORY_CELL = ("import json as _json, torch as _torch\n"
                    "print(_json.dumps({'allocated': _torch.cuda.max_memory_allocated(), "
                    "'reserved': _torch.cuda.max_memory_reserved()}))")


# Appended after it, read back and removed: the files of the course the kernel ran (every imported module, every
# file a module names in a module-level Path, as 08's op names its .cpp, and every worker program it started, which
# ran in a process of its own), for the stamp's ``code_files_sha256``.
RAN_FILES_CELL = ("import json as _json, pathlib as _pathlib, sys as _sys\n"
                  "_ran = set()\n"
                  "for _module in list(_sys.modules.values()):\n"
                  "    if getattr(_module, '__file__', None):\n"
                  "        _ran.add(_module.__file__)\n"
                  "        _ran.update(str(_v) for _v in vars(_module).values()\n"
                  "                    if isinstance(_v, _pathlib.PurePath) and _pathlib.Path(_v).is_file())\n"
                  "_workers = _sys.modules.get('helpers.workers')\n"
                  "if _workers is not None:\n"
                  "    _ran.update(str(_pathlib.Path(_workers.__file__).with_name(f'{_name}.py'))\n"
                  "                for _name in getattr(_workers, 'STARTED', ()))\n"
                  "print(_json.dumps(sorted(_ran)))")


def kernel_env() -> dict:
    """The environment a notebook kernel starts with: the caller's, with the inline matplotlib backend,
    Jupyter's current folder layout (no migration warning) and debugpy's start-up check off."""
    env = dict(os.environ)
    env.update(MPLBACKEND=INLINE_BACKEND, JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1",
               COURSE_HEADLESS="1")  # progress bars print one line at the end instead of stored redraws
    return env


def _kernel_manager():
    """A kernel manager whose 'python3' is this interpreter (the venv's), whatever
    other kernelspecs are installed on the machine."""
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class CurrentPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            if kernel_name == "python3":
                return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())
            return super().get_kernel_spec(kernel_name)

    return KernelManager(kernel_name="python3", kernel_spec_manager=CurrentPython())


def _file_logger(path: Path) -> logging.Logger:
    logger = logging.getLogger(f"course.execute.{path.stem}")
    logger.handlers[:] = [logging.FileHandler(path, mode="a")]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def _printed_json(cell):
    """The JSON value an injected cell printed as its last stdout line, or None (it did not run, or printed none)."""
    import json

    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            try:
                return json.loads(out["text"].strip().splitlines()[-1])
            except (ValueError, IndexError):
                return None
    return None


def _peak_memory_gib(cell) -> dict | None:
    """``{"allocated": GiB, "reserved": GiB}`` from the output of ``PEAK_MEMORY_CELL`` (None if it did not run)."""
    peaks = _printed_json(cell)
    return None if peaks is None else {key: round(value / 2**30, 2) for key, value in peaks.items()}


def _ran_files(cell) -> list[str] | None:
    """The course's files (``notebooks.COURSE_CODE``) among those ``RAN_FILES_CELL`` printed, relative to the
    checkout (None if it did not run)."""
    from .notebooks import COURSE_CODE

    files = _printed_json(cell)
    if files is None:
        return None
    ran = {Path(f).resolve() for f in files}
    return sorted(str(f.relative_to(ROOT)) for f in ran
                  if f.is_relative_to(ROOT) and f.relative_to(ROOT).parts[0] in COURSE_CODE)


DEEP_DIVES_OFF = "DeepDivesOff"   # helpers.deep_dives: a deep dive's guard with DEEP_DIVES = False


def stopped_at_the_deep_dives(nb) -> bool:
    """Whether a ``--core`` run stopped where it should: its only error is a deep dive's guard saying the core
    ended (a rewritten notebook; one with the old switch runs to its end instead)."""
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    return len(errors) == 1 and errors[0].get("ename") == DEEP_DIVES_OFF


def inject_core_switch(nb) -> None:
    """Set ``DEEP_DIVES = False`` in a cell right after the parameters cell (as papermill injects parameters)."""
    import nbformat

    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    cell = nbformat.v4.new_code_cell("DEEP_DIVES = False  # injected by python -m tools.execute --core")
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(at + 1, cell)


def execute_one(path: str, output_dir: str | None, timeout: int, allow_errors: bool,
                core: bool = False) -> tuple[str, str, float]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from helpers.features import notebook_requirements_met
    from .claims import prose_record
    from .gates import read_needs
    from .notebooks import write_stamp

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    ok, reason = notebook_requirements_met(read_needs(nb).requires)
    if not ok:
        return path.name, f"skipped: {reason}", 0.0
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{path.stem}.log"
    log_path.write_text("")
    logger = _file_logger(log_path)
    if core:
        inject_core_switch(nb)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_MEMORY_CELL))
    nb.cells.append(nbformat.v4.new_code_cell(RAN_FILES_CELL))
    client = NotebookClient(nb, km=_kernel_manager(), timeout=timeout, allow_errors=allow_errors,
                            resources={"metadata": {"path": str(path.parent)}}, log=logger)
    t0 = time.perf_counter()
    status = "ok"
    with open(log_path, "a") as kernel_log, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            client.execute(env=kernel_env(), stdout=kernel_log, stderr=kernel_log)
        except CellExecutionError as exc:
            if not (core and stopped_at_the_deep_dives(nb)):
                status = "error: " + str(exc).strip().splitlines()[-1][:200]
        for w in caught:
            logger.warning("%s: %s", w.category.__name__, w.message)
    runtime = time.perf_counter() - t0
    ran_files = _ran_files(nb.cells.pop())
    peak = _peak_memory_gib(nb.cells.pop())
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error" and not (core and o.get("ename") == DEEP_DIVES_OFF)]
    if status == "ok" and errors:
        status = f"error: {len(errors)} cell(s) raised ({errors[0].get('ename')}: {errors[0].get('evalue', '')[:120]})"
    if status == "ok" and ran_files is None and not core:
        status = "error: the run's last cell did not say which course files it used (the stamp needs them)"
    if status != "ok":
        status += f"  [kernel log: {log_path.relative_to(ROOT)}]"
    elif not core:  # a core run proves the core runs alone; the stored notebook is the full run
        write_stamp(nb, runtime_s=runtime, peak_memory_gib=peak, prose_claims=prose_record(nb), ran_files=ran_files)
    target = Path(output_dir) / path.name if output_dir else path
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return path.name, status, runtime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: notebooks/*.ipynb)")
    parser.add_argument("--output-dir", help="write executed copies here instead of in place")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at once (timings are only honest with 1)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--allow-errors", action="store_true", help="keep going past a failing cell (debugging)")
    parser.add_argument("--core", action="store_true",
                        help="DEEP_DIVES = False: run the core lessons only (needs --output-dir), to prove each runs "
                             "alone; the website's core times come from the full run's stamp")
    args = parser.parse_args(argv)
    if args.core and not args.output_dir:
        parser.error("--core needs --output-dir: the stored notebooks carry full runs")
    if args.core and args.allow_errors:
        parser.error("--core stops at the first deep dive's guard, an error: it cannot go with --allow-errors")

    from helpers.device import PROFILE_ENV, active_profile, has_gpu

    if active_profile():
        print(f"{PROFILE_ENV}={active_profile().key} rehearses another GPU for the tests; stored outputs come from the "
              f"real GPU: unset {PROFILE_ENV} to run the notebooks.")
        return 2
    if not has_gpu():
        print("No NVIDIA GPU found: the notebooks run on a GPU only (see README, 'GPU and cuDNN requirements').")
        return 2
    from .notebooks import notebook_paths
    from .results_csv import sync_results

    paths = args.notebooks or [str(p) for p in notebook_paths()]
    if not paths:
        print("no notebooks found")
        return 1
    results = []
    if args.core:  # its H.record calls are a partial run: they must not overwrite the full run's numbers
        import tempfile

        os.environ["COURSE_RESULTS_DIR"] = tempfile.mkdtemp(prefix="course-core-results-")

    def report(result):
        results.append(result)
        print(f"{result[0]:<40} {result[1]}  ({result[2]:.0f} s)", flush=True)

    if args.jobs > 1:
        with cf.ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(execute_one, p, args.output_dir, args.timeout, args.allow_errors,
                                   args.core) for p in paths]
            for fut in cf.as_completed(futures):
                report(fut.result())
    else:
        for p in paths:
            report(execute_one(p, args.output_dir, args.timeout, args.allow_errors, args.core))

    from .results_csv import headline_table

    if not args.output_dir:  # the CSV and the pins are derived from the stored notebooks, so they cannot drift
        sync_results()
        from .pins import write_pins

        print(write_pins())
    print("\nHeadline numbers (results/<gpu>.csv, from the stored outputs):")
    print(headline_table())
    failed = [r for r in results if r[1].startswith("error")]
    print(f"\n{len(results) - len(failed)} of {len(results)} notebooks ran without error")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
