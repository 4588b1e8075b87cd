#!/usr/bin/env bash
# GPU check: install the CUDA extra, time a 4x4 grid of coevolution cells and a vectorized PBT
# round (a tiny MLP pair first, then the 32x32 DCGAN), then run the GPU-relevant tests on the
# device; one JSON line per phase as it ends (the device, each workload's compile and run times
# and fraction of peak FLOP/s, a summary, the tests): experiments/benchmarks/gpu_check.py.
# The first line comes within seconds; the compiled programs are kept in the compilation cache
# (MINMAXLAB_CACHE_DIR), so a second call skips the compiles; no workload starts after
# GPU_CHECK_BUDGET_S (default 240) seconds.
#
#   experiments/benchmarks/gpu_check.sh [--dry] [--out FILE]
#
# --dry (or GPU_CHECK_DRY=1): no install, no test run, tiny sizes on whatever device JAX has
# (the CPU in CI and the test suite): the device line, the small case and the summary. Environment: PYTHON (default .venv/bin/python, else python3),
# CUDA_EXTRA (default cuda13; cuda12 for CUDA 12 drivers), GPU_CHECK_TESTS (the test files),
# GPU_CHECK_PEAK_FLOPS (override the peak table), GPU_CHECK_INSTALL=0 (a machine without a
# registry whose Python already has JAX with CUDA: no install; the repository on PYTHONPATH),
# GPU_CHECK_TESTS=none (no tests). The JSON lines go to stdout and are appended to FILE
# (default runs/gpu_check.jsonl).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

dry="${GPU_CHECK_DRY:-0}"
out="runs/gpu_check.jsonl"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry) dry=1 ;;
    --out) out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
mkdir -p "$(dirname "$out")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
helper_args=(--out "$out")
tests=none

if [ "$dry" = "1" ]; then
  helper_args+=(--dry)
else
  extra="${CUDA_EXTRA:-cuda13}"
  if [ "${GPU_CHECK_INSTALL:-1}" = "0" ]; then
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "gpu_check: installing minmaxlab[$extra]" >&2
    "$py" -m pip install --quiet -e ".[$extra]" >&2
  fi
  export JAX_PLATFORMS=cuda
  "$py" -c 'import jax; d = jax.devices()[0]; assert d.platform == "gpu", d; print("gpu_check:", d.device_kind, file=__import__("sys").stderr)'
  tests="${GPU_CHECK_TESTS:-tests/gan/test_gan_resnet.py tests/transforms/test_unrolled.py tests/gan/test_gan_models.py tests/transforms/test_transforms_suite.py tests/coevolution/test_coevolution.py tests/pbt/test_pbt_vectorized.py}"
fi

# The timings first: their lines come while the tests would still be collecting.
"$py" experiments/benchmarks/gpu_check.py "${helper_args[@]}"

if [ "$dry" != "1" ] && [ "$tests" != "none" ]; then
  echo "gpu_check: pytest $tests" >&2
  set +e
  # shellcheck disable=SC2086
  "$py" -m pytest -q -p no:cacheprovider $tests --junitxml="$work/junit.xml" >&2
  rc=$?
  set -e
  "$py" - "$work/junit.xml" "$rc" "$tests" "$out" <<'PY'
import json, sys, xml.etree.ElementTree as ET
path, rc, files, out_file = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
out = {"check": "gpu_check", "dry": False, "phase": "tests", "files": files, "pytest_exit_code": rc}
try:
  suites = ET.parse(path).getroot()
  suites = [suites] if suites.tag == "testsuite" else list(suites)
  for k in ("tests", "failures", "errors", "skipped"):
    out[k] = sum(int(s.get(k, 0)) for s in suites)
  out["seconds"] = sum(float(s.get("time", 0)) for s in suites)
except (OSError, ET.ParseError) as e:
  out["junit_error"] = str(e)
line = json.dumps(out, separators=(", ", ": "))
print(line, flush=True)
with open(out_file, "a") as f:
  f.write(line + "\n")
PY
fi
