#!/usr/bin/env bash
# Reproduces the numbers in experiments/gan/README.md. Run from the repository root:
#   bash experiments/gan/results.sh            # all
#   bash experiments/gan/results.sh ring8      # only the 8-Gaussian ring
#   bash experiments/gan/results.sh fashion    # only Fashion-MNIST (fashion_alt / fashion_la: one half)
# Runs go to runs/gan_results/ one after another (nice'd: the machine is shared).
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/gan_results}
CFG=experiments/gan/configs
WHAT=${1:-all}
run() { nice -n 10 "$PY" -m experiments.gan.main "$@" --config.progress=False > /dev/null; }

if [[ $WHAT == all || $WHAT == ring8 ]]; then
  for seed in 0 1 2; do
    run --config $CFG/ring8.py --workdir $OUT/ring8_alt_s$seed --config.seed=$seed
    run --config $CFG/ring8.py --workdir $OUT/ring8_la_alt_s$seed --config.seed=$seed \
        --config.lookahead=True
  done
  $PY -m experiments.gan.summarize $OUT/ring8_alt_s? -- $OUT/ring8_la_alt_s?
  $PY -m experiments.gan.summarize --last 3 $OUT/ring8_alt_s? -- $OUT/ring8_la_alt_s?
fi

if [[ $WHAT == all || $WHAT == fashion* ]]; then
  # CPU budget: the Lookahead-minmax MNIST DCGAN at width 8 (channels G 64-32-16-1, D 8-16-32-1;
  # the paper uses width 64), batch 32, 2000 generator steps, Adam(1e-3, b1=0.05); LA k=5, alpha=0.5.
  SMALL=(--config.width=8 --config.batch_size=32 --config.num_steps=2000
         --config.eval_every=1000 --config.checkpoint_every=1000)
  # "fashion_alt" and "fashion_la" run one half each (e.g. in two terminals).
  for seed in ${SEEDS:-0 1 2}; do
    [[ $WHAT == fashion_la ]] || run --config $CFG/fashion_mnist_dcgan.py \
        --workdir $OUT/fm_dcgan_alt_s$seed --config.seed=$seed "${SMALL[@]}"
    [[ $WHAT == fashion_alt ]] || run --config $CFG/fashion_mnist_dcgan.py \
        --workdir $OUT/fm_dcgan_la_alt_s$seed --config.seed=$seed --config.lookahead=True "${SMALL[@]}"
  done
  if [[ $WHAT == all || $WHAT == fashion ]]; then
    $PY -m experiments.gan.summarize $OUT/fm_dcgan_alt_s? -- $OUT/fm_dcgan_la_alt_s?
  fi
fi
