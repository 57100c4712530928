#!/usr/bin/env bash
# One device call: install from bundled wheels, record the machine, run the tests and chapter 7
# through the README's entry point. Everything lands in $OUT (logs, mlflow.db, artifacts).
#   PERFLAB_TARGETS (default ch7), PERFLAB_PYTEST_ARGS (default: the whole suite)
set -uo pipefail
OUT=${OUT:-/tmp/perflab-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  date -u; nvidia-smi; python3 --version; ls -a
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
} > "$OUT/machine.txt" 2>&1
PERFLAB_WHEELS=${PERFLAB_WHEELS:-.whl} ./install.sh --test > "$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
tail -1 "$OUT/install.log"
python3 -m pytest -q -p no:cacheprovider ${PERFLAB_PYTEST_ARGS:-tests} > "$OUT/pytest.log" 2>&1
echo "pytest exit $?"; tail -15 "$OUT/pytest.log"
mlflow run . -e chapter -P ch="${PERFLAB_TARGETS:-7}" --env-manager local > "$OUT/chapter.log" 2>&1
echo "mlflow run exit $?"
grep -v "━" "$OUT/chapter.log" | tail -30
cp mlflow.db "$OUT/"; tar czf "$OUT/mlruns.tgz" mlruns 2> /dev/null
perflab show --tracking-uri sqlite:///mlflow.db | tee "$OUT/show.md"
git -c safe.directory='*' log -1 --format='commit %H %s' | tee -a "$OUT/machine.txt"
echo done
