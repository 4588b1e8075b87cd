#!/usr/bin/env bash
# The two pre-registered studies that ran on a GPU (issue 34), in one command, from the
# repository root:
#   experiments/gan/protocols/lookahead.v1.json            one process per arm (10 seeds vmapped)
#   experiments/coevolution/protocols/lipizzaner_grids.v1.json   one process per seed
# Both are scored by ONE evaluation classifier, trained first (in $MINMAXLAB_CACHE); every
# process then only reads it. Results: experiments/gan/results/v1/ and
# experiments/coevolution/results/v1/ (JSON + figure); logs and runs under $RUNS. Each study
# command resumes a stopped run and skips a finished one, so the script can be rerun.
#
#   bash experiments/gpu_studies.sh [--quick]
#
# --quick: a tiny budget of both (digits8, a few steps) into $RUNS/quick, to check a machine.
# Environment: PYTHON (default python3), RUNS (default runs/gpu_studies), STUDIES (default
# "lookahead grids").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py="${PYTHON:-python3}"
runs="${RUNS:-runs/gpu_studies}"
studies="${STUDIES:-lookahead grids}"
a_out=experiments/gan/results/v1
b_out=experiments/coevolution/results/v1
a_extra=()
b_extra=()
dataset=fashion_mnist
if [ "${1:-}" = "--quick" ]; then
  runs="$runs/quick"
  a_out="$runs/lookahead_out"
  b_out="$runs/grids_out"
  dataset=digits8
  a_extra=(--seeds 0,1 --steps 20 --eval-every 10 --eval-samples 100 --set dataset=digits8
    "--set=hidden=[16,16]" --set classifier.steps=30)
  b_extra=(--generations 2 --eval-every 1 --steps 4 --set dataset=digits8 "--set=hidden=[16,16]"
    --set batch_size=16 --set classifier.steps=30)
fi
mkdir -p "$runs/logs"
mkdir -p "$runs/cache"
export MINMAXLAB_CACHE="${MINMAXLAB_CACHE:-$(cd "$runs/cache" && pwd)}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several processes share one GPU
steps=1500
[ "$dataset" = digits8 ] && steps=30
echo "gpu_studies: classifier ($dataset, $steps steps) into $MINMAXLAB_CACHE"
"$py" -c "
from experiments import _classifier_cache as c
_, clf = c.classifier_evaluator('$dataset', steps=$steps)
print('gpu_studies: classifier test accuracy', clf.test_accuracy)
print('gpu_studies: classifier', c.cached_identity('$dataset', None))
" || exit 1
pids=()
if [[ $studies == *lookahead* ]]; then
  for arm in alt la_alt_k5 la_alt_k1000 eg la_eg_k1000; do
    "$py" -m experiments.gan.results run --protocol experiments/gan/protocols/lookahead.v1.json \
      --arms "$arm" --runs "$runs" --out "$a_out/lookahead.json" "${a_extra[@]}" \
      >"$runs/logs/lookahead_$arm.log" 2>&1 &
    pids+=($!)
  done
fi
if [[ $studies == *grids* ]]; then
  nseeds=6
  [ "$dataset" = digits8 ] && nseeds=1
  for ((seed = 0; seed < nseeds; seed++)); do
    "$py" -m experiments.coevolution.lipizzaner_grids \
      --protocol experiments/coevolution/protocols/lipizzaner_grids.v1.json --seeds "$seed" \
      --runs "$runs/grids" --out "$b_out" "${b_extra[@]}" >"$runs/logs/grids_s$seed.log" 2>&1 &
    pids+=($!)
  done
fi
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
echo "gpu_studies: done (status $status); logs in $runs/logs"
exit $status
