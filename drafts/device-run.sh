#!/usr/bin/env bash
# The drafts' run of record on the device tool's GPU machine (kind nvidia-h100-x1), then their tests from a fresh copy.
#   exec NN...  execute the notebooks in order (each copied to $OUT when done; then the results CSVs and
#               constraints.txt), then nbval and the exercise tests of those notebooks, stopping before 600 s
#   t4 NN...    the same tests under COURSE_GPU=t4 (the rehearsal of a T4); PLAIN=1 reruns the plain ones after
#   plain NN... the plain tests alone (after an exec with NOTEST=1, when executing and testing overrun 600 s)
# Before the call, on the CPU machine: git apply drafts/issue-NN.patch; cp drafts/NN_*.ipynb notebooks/; the wheels
# in .whl/ (drafts/README.md). Call with carry [".whl"]. EXTRA_TESTS adds test ids to both runs.
set -u
MODE=${1:-exec}; shift
NBS=("$@")
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee -a "$OUT/gpu.txt"
python3 -c "import cudnn, torch; print('cudnn', cudnn.backend_version(), 'frontend', cudnn.__version__, 'torch', torch.__version__)"
TESTS="${EXTRA_TESTS:-}"
for nn in "${NBS[@]}"; do TESTS="$TESTS $(ls notebooks/${nn}_*.ipynb) tests/test_exercises_nb${nn}.py"; done
if [ "$MODE" = exec ]; then
  for nn in "${NBS[@]}"; do
    nb=$(ls notebooks/${nn}_*.ipynb)
    python3 -m tools.execute "$nb" 2>&1 | tee -a "$OUT/execute.log"
    cp "$nb" "$OUT/"; echo "$(( $(date +%s) - T0 )) s: $nb done" | tee -a "$OUT/execute.log"
  done
  cp results/*.csv constraints.txt "$OUT/" 2>/dev/null
fi
rm -rf /tmp/t && mkdir /tmp/t && tar --exclude=./.git --exclude=./.whl -cf - . | (cd /tmp/t && tar xf -)
cd /tmp/t
left() { echo $(( 585 - ( $(date +%s) - T0 ) )); }
if [ "$MODE" = exec ] && [ "${NOTEST:-}" = 1 ]; then
  echo "NOTEST=1: no tests in this call"
elif [ "$MODE" = exec ] || [ "$MODE" = plain ]; then
  timeout "$(left)" python3 -m pytest $TESTS -n 2 --dist loadfile -q -p no:cacheprovider 2>&1 | tee "$OUT/plain.log" | tail -40
else
  COURSE_GPU=t4 timeout "$(left)" python3 -m pytest $TESTS -n 2 --dist loadfile -q -p no:cacheprovider 2>&1 \
    | tee "$OUT/t4.log" | tail -30
  [ "${NBS[*]}" ] && [ "${PLAIN:-}" = 1 ] && timeout "$(left)" python3 -m pytest $TESTS -n 2 --dist loadfile -q \
    -p no:cacheprovider 2>&1 | tee "$OUT/plain.log" | tail -30
fi
echo "total $(( $(date +%s) - T0 )) s"
