r"""Version 1 of the PBT vs random-search study (issue 34, pre-registered in
``protocols/pbt_vs_rs.v1.json``): per seed and arm the search (``search.run_search``), the
winner re-scored on fresh samples, its replay from scratch; the committed JSON, the README
table with the registered verdict and the figure, on the study runner (``experiments.study``):

  python -m experiments.pbt.pbt_vs_rs_v1 run      # run (or resume) every missing (arm, seed)
  python -m experiments.pbt.pbt_vs_rs_v1 report   # the README block, from the committed JSON
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from experiments import study
from experiments.pbt.search import ROOT, offline_trial, replay, run_search, slow_eval_task

V1 = "pbt_vs_rs_v1"
PROTOCOL_V1 = ROOT / "protocols" / "pbt_vs_rs.v1.json"
RESULTS_V1 = ROOT / "results" / "pbt_vs_rs_v1.json"
# Keys of the winners' 10k-sample re-scoring and of the replays' final scoring: jax keys
# from these constants folded with the study seed, never a trial's seed (trial_keys), so
# their latents are fresh draws, the same for both arms of a pair.
RESCORE_SALT = 0x5EC0_0001
REPLAY_SCORE_SALT = 0x5EC0_0002
REPLAY_SEED_BASE = 1000  # replay trial seeds: replay(..., seed=REPLAY_SEED_BASE + study seed)
TRIAL_FIELDS = ("trial", "member", "parent", "start_step", "fid")
HPARAMS = ("lr_G", "lr_D", "slow_step_size", "sync_period")


def v1_config(protocol: dict, seed: int, arm: str):
  """The ``fashion_mnist_lagan`` config with the protocol's overrides (dotted names
  allowed), the study seed and the arm's settings (``exploit``)."""
  from experiments.pbt.configs import fashion_mnist_lagan

  c = fashion_mnist_lagan.get_config()
  for name, value in {**protocol["settings"].get("overrides", {}), **protocol["arms"][arm]}.items():
    if name in ("label", "description"):
      continue
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    node[leaf] = tuple(value) if isinstance(node[leaf], tuple) else value
  c.seed = int(seed)
  return c


def lineage_trials(config) -> int:
  """Trials per member (the configured lineage length): the replays' length."""
  return int(config.num_trials) // int(config.population_size)


def score_keys(salt: int, seed: int, n_samples: int, chunk: int) -> list:
  """The keys of ``ceil(n_samples / chunk)`` batches of ``chunk`` latents for study seed
  ``seed`` (``salt``: RESCORE_SALT or REPLAY_SCORE_SALT)."""
  import jax

  base = jax.random.fold_in(jax.random.key(salt), seed)
  return [jax.random.fold_in(base, i) for i in range(-(-int(n_samples) // int(chunk)))]


def score_generator(task, g_params, keys, n_samples: int) -> float:
  """Classifier-FID of ``n_samples`` images of ``g_params`` drawn with ``keys`` (batches of
  the task's ``eval_samples``, the last one cut)."""
  _, _, generate, _, evaluator = task.programs()
  fake = np.concatenate([np.asarray(generate(k, g_params)) for k in keys])[: int(n_samples)]
  if len(fake) != int(n_samples):
    raise ValueError(f"{len(keys)} keys give {len(fake)} < {n_samples} samples")
  return float(evaluator(fake)["fid"]) if np.all(np.isfinite(fake)) else math.inf


def _slow_generator(state):
  import minmaxlab

  return minmaxlab.lookahead_slow_params(state["opt_state"]).min


def scorer_identity(task) -> dict:
  """The evaluation classifier that scores ``task``: the digest of its parameters (as
  ``_classifier_cache`` stamps it), its held-out accuracy and the CPU it was trained on."""
  from experiments import _classifier_cache
  from minmaxlab import runner

  clf = task.programs()[4].extractor
  n = int(task.cfg["train_examples"])
  name = "fashion_mnist" if n == 0 else f"fashion_mnist_first{n}"
  cached = _classifier_cache.cached_identity(name, task.cfg["classifier_cache_dir"] or None) or {}
  digest = _classifier_cache.params_digest(clf.params)
  if cached.get("params_digest") not in (None, digest):
    raise ValueError(f"cached statistics of {name} stamped {cached['params_digest']}, not {digest}")
  return {
    "params_digest": digest,
    "test_accuracy": float(clf.test_accuracy),
    "trained_on": cached.get("trained_on") or runner.cpu_model(),
  }


def rescore_winner(task, config, run: dict, rescore_samples: int) -> dict:
  """The winner (best trial by its selection FID) restored from its checkpoint and scored
  at its slow weights on ``rescore_samples`` fresh samples (``score_keys(RESCORE_SALT)``)."""
  from minmaxlab import pbt

  best = next(t for t in run["trials"] if t["trial"] == run["best_trial"])
  trial = offline_trial(
    id=best["trial"],
    member=best["member"],
    parent_id=None,
    hparams={},
    start_step=best["start_step"],
    steps=config.steps_per_trial,
    seed=0,
    status="done",
    worker="rescore",
    processed=True,
  )
  state = pbt.load_checkpoint(run["best_ckpt"], task.init(trial))
  end = best["start_step"] + config.steps_per_trial
  if int(state["step"]) != end:
    raise ValueError(f"winner {best['trial']}: checkpoint at step {int(state['step'])}, not {end}")
  t0 = time.process_time()
  keys = score_keys(RESCORE_SALT, config.seed, rescore_samples, config.eval_samples)
  fid = score_generator(task, _slow_generator(state), keys, rescore_samples)
  return {"rescored_fid": fid, "samples": int(rescore_samples), "cpu_s": time.process_time() - t0}


def replay_schedule(run: dict, arm: str, length: int) -> list[dict]:
  """The hyperparameters (raw, as the controller stores them) per trial of the winner's
  replay: PBT follows the winner's lineage trial by trial, then keeps its last
  hyperparameters up to ``length`` trials; random search repeats the winner's static ones."""
  chain = [t["hparams"] for t in run["best_lineage"]]
  if arm == "random_search":
    chain = chain[-1:]
  return [dict(h) for h in (chain + [chain[-1]] * length)[:length]]


def run_replay_v1(task, config, run: dict, arm: str, rescore_samples: int) -> dict:
  """The winner's hyperparameters re-trained from scratch (fresh seeds, the same for both
  arms) for the full lineage length; the selection-size FID after every trial and the
  final slow weights' FID on ``rescore_samples`` fresh samples."""
  length = lineage_trials(config)
  schedule = replay_schedule(run, arm, length)
  t0 = time.process_time()
  fids, state = replay(config, schedule, REPLAY_SEED_BASE + int(config.seed), return_state=True)
  keys = score_keys(REPLAY_SCORE_SALT, config.seed, rescore_samples, config.eval_samples)
  final = score_generator(task, _slow_generator(state), keys, rescore_samples)
  return {
    "trials": length,
    "steps": int(state["step"]),
    "lineage_trials": len(run["best_lineage"]),
    "schedule": [task.describe(h) for h in schedule],
    "fids": fids,
    "final_fid": final,
    "cpu_s": time.process_time() - t0,
  }


def _round(v, digits=6):
  return float(f"{float(v):.{digits}g}")


def _compact_run(arm: str, config, task, run: dict, rescore: dict, rep: dict, scorer) -> dict:
  """The committed record of one (arm, seed): every trial as a row of TRIAL_FIELDS +
  HPARAMS, the winner, its re-score and its replay."""
  best = next(t for t in run["trials"] if t["trial"] == run["best_trial"])
  return {
    "arm": arm,
    "seed": int(config.seed),
    "exploit": config.exploit,
    "cpu_s": round(run["cpu_s"], 1),
    "classifier": scorer,
    "trials": [
      [t["trial"], t["member"], t["parent"], t["start_step"], _round(t["fid"])]
      + [_round(t[k], 4) for k in HPARAMS]
      for t in run["trials"]
    ],
    "winner": {
      "trial": best["trial"],
      "member": best["member"],
      "steps": best["start_step"] + config.steps_per_trial,
      "selection_fid": _round(run["best_fid"]),
      "rescored_fid": _round(rescore["rescored_fid"]),
      "rescore_samples": rescore["samples"],
      "rescore_cpu_s": round(rescore["cpu_s"], 1),
      "hparams": {k: _round(best[k], 4) for k in HPARAMS},
      "lineage": [
        {k: _round(v, 4) for k, v in task.describe(t["hparams"]).items()}
        for t in run["best_lineage"]
      ],
    },
    "replay": {
      **{k: rep[k] for k in ("trials", "steps", "lineage_trials")},
      "fids": [_round(f) for f in rep["fids"]],
      "final_fid": _round(rep["final_fid"]),
      "cpu_s": round(rep["cpu_s"], 1),
    },
  }


def run_one(ctx, arm: str, seed: int) -> dict:
  """One (arm, seed) of the registered study: the search, the winner's re-score and its
  replay (each cached in the run's folder ``<runs>/pbt_vs_rs_v1/<arm>_s<seed>``); its record."""
  config = v1_config(ctx.protocol, seed, arm)
  rescore_samples = int(ctx.protocol["settings"]["rescore_samples"])
  workdir = ctx.runs / V1 / f"{arm}_s{seed}"
  run = run_search(config, workdir, ctx.log)
  task = slow_eval_task(config)
  scorer = scorer_identity(task)
  rescore = _cached(workdir / "v1_rescore.json", rescore_winner, task, config, run, rescore_samples)
  ctx.log(
    f"{arm} s{seed}: winner trial {run['best_trial']} selection FID {run['best_fid']:.1f}, "
    f"rescored on {rescore_samples}: {rescore['rescored_fid']:.1f}"
  )
  rep = _cached(workdir / "v1_replay.json", run_replay_v1, task, config, run, arm, rescore_samples)
  ctx.log(f"{arm} s{seed}: replay {rep['trials']} trials, final FID {rep['final_fid']:.1f}")
  return _compact_run(arm, config, task, run, rescore, rep, scorer)


def _cached(path: Path, fn, *args) -> dict:
  """``fn(*args)``, kept in ``path`` (a JSON file) and read back from there once written."""
  if path.exists():
    return json.loads(path.read_text())
  out = fn(*args)
  path.write_text(json.dumps(out))
  return out


def _header(ctx, runs: list) -> dict:
  """The fields of the results JSON beside its runs."""
  path, repo = ctx.protocol_path.resolve(), ROOT.parent.parent
  return dict(
    study=ctx.protocol["study"],
    version=ctx.protocol["version"],
    protocol=str(path.relative_to(repo)) if path.is_relative_to(repo) else str(ctx.protocol_path),
    trial_fields=list(TRIAL_FIELDS + HPARAMS),
  )


def _saved(ctx, out: Path) -> None:
  """After every write: one classifier scored every run, and the figure redrawn."""
  from experiments import _report

  data = json.loads(out.read_text())
  _report.one_scorer(data["runs"], lambda r: f"{r['arm']} s{r['seed']}")
  plot_v1(data, out.with_suffix(".png"))


# Every (arm, seed) of the protocol, seed-major, into one JSON (``results/pbt_vs_rs_v1.json``).
STUDY = study.Study(
  protocol=PROTOCOL_V1,
  results=RESULTS_V1,
  run_one=run_one,
  runs="runs",
  blocks=(V1,),
  header=_header,
  sort_key=lambda protocol, r: (r["seed"], list(protocol["arms"]).index(r["arm"])),
  saved=_saved,
)


def _v1_values(data: dict, protocol: dict) -> dict:
  """Per arm, per seed: the values of the primary and secondary metrics (complete pairs
  only, in the protocol's seed order)."""
  by = {(r["arm"], r["seed"]): r for r in data["runs"]}
  arms = list(protocol["arms"])
  seeds = [s for s in protocol["seeds"] if all((a, s) in by for a in arms)]
  metrics = {
    "rescored": lambda r: r["winner"]["rescored_fid"],
    "selection": lambda r: r["winner"]["selection_fid"],
    "replay": lambda r: r["replay"]["final_fid"],
  }
  return {
    "seeds": seeds,
    **{m: {a: [f(by[(a, s)]) for s in seeds] for a in arms} for m, f in metrics.items()},
    "runs": by,
  }


def table_v1(data: dict, protocol: dict) -> str:
  """Markdown of the pre-registered study: every seed's paired values, the primary verdict
  (``stats.compare`` + ``stats.verdict`` at the protocol's test and alpha), the Wilcoxon
  p-value, and the secondary metrics (paired differences, no verdict)."""
  from experiments import _report, stats

  scorer = _report.one_scorer(data["runs"], lambda r: f"{r['arm']} s{r['seed']}")
  v = _v1_values(data, protocol)
  ((a, b),) = protocol["primary"]["comparisons"]
  label = {k: protocol["arms"][k].get("label", k) for k in protocol["arms"]}
  seeds = v["seeds"]
  lines = _v1_seed_rows(v, a, b, label)
  lines.append("")
  lines.append(
    f"Mean ± sample sd (every seed in the table). Rescored FID: {label[a]} "
    f"{stats.fmt_mean_sd(v['rescored'][a])}, {label[b]} {stats.fmt_mean_sd(v['rescored'][b])}."
    if seeds
    else "No complete pair yet."
  )
  lines.append("")
  want = len(protocol["seeds"])
  if len(seeds) < want:
    lines.append(
      f"**Incomplete: {len(seeds)} of {want} registered pairs finished; no verdict "
      "(the protocol's endpoint is all pairs).**"
    )
  if len(seeds) == want:  # the verdict only at the registered endpoint: every pair
    lines += _v1_verdict_lines(v, a, b, label, protocol["primary"])
  cpu = sum(r["cpu_s"] + r["winner"]["rescore_cpu_s"] + r["replay"]["cpu_s"] for r in data["runs"])
  lines.append("")
  lines.append(
    f"Scorer: evaluation classifier {scorer['params_digest'] if scorer else 'unrecorded'}"
    + (
      f" (test accuracy {scorer['test_accuracy']:.4f}, trained on {scorer['trained_on']})"
      if scorer
      else ""
    )
    + f"; CPU seconds of all runs: {cpu:.0f}."
  )
  return "\n".join(lines)


def _v1_seed_rows(v: dict, a: str, b: str, label: dict) -> list[str]:
  """The table of every seed's pair: winners, selection and rescored FIDs, replay FIDs."""
  lines = [
    f"| seed | {label[a]} winner: trial, selection FID (1k) | rescored FID (10k) | "
    f"{label[b]} winner: trial, selection FID (1k) | rescored FID (10k) | "
    f"rescored difference {label[a]} − {label[b]} | replay FID (10k) {label[a]} / {label[b]} |",
    "|---|---|---|---|---|---|---|",
  ]
  for i, s in enumerate(v["seeds"]):
    ra, rb = v["runs"][(a, s)], v["runs"][(b, s)]
    lines.append(
      f"| {s} | {ra['winner']['trial']}, {v['selection'][a][i]:.1f} | "
      f"{v['rescored'][a][i]:.1f} | {rb['winner']['trial']}, {v['selection'][b][i]:.1f} | "
      f"{v['rescored'][b][i]:.1f} | {v['rescored'][a][i] - v['rescored'][b][i]:+.1f} | "
      f"{v['replay'][a][i]:.1f} / {v['replay'][b][i]:.1f} |"
    )
  return lines


def _v1_verdict_lines(v: dict, a: str, b: str, label: dict, prim: dict) -> list[str]:
  """The registered verdict (at every pair), the Wilcoxon p, the secondary differences."""
  from experiments import stats

  r = stats.compare(
    v["rescored"][a],
    v["rescored"][b],
    test=prim["test"],
    paired=True,
    alternative=prim["alternative"],
  )
  w = stats.wilcoxon(v["rescored"][a], v["rescored"][b], alternative=prim["alternative"])
  text = stats.verdict(
    r,
    alpha=prim["alpha"],
    name_a=label[a],
    name_b=label[b],
    lower_is_better=prim["lower_is_better"],
    metric="the winner's FID rescored on 10k fresh samples",
  )
  lines = [
    "**Verdict (primary, at the registered endpoint):** "
    + text
    + f" Paired Wilcoxon signed-rank p = {stats.fmt_p(w)} (reported, not the "
    f"registered test). Differences {label[a]} − {label[b]}, alpha {prim['alpha']}, "
    f"{prim['alternative']}.",
    "",
    "Secondary (no verdict; mean paired difference and its paired bootstrap 95% CI):",
    "",
  ]
  for key, what in (
    ("selection", "the selection-time minimum (the winner's own 1k-sample FID)"),
    (
      "replay",
      "the winners' hyperparameters replayed from scratch to the full lineage "
      "length, FID on 10k fresh samples",
    ),
  ):
    d = np.asarray(v[key][a]) - np.asarray(v[key][b])
    lo, hi = stats.diff_ci(v[key][a], v[key][b], paired=True)
    lines.append(
      f"- {what}: {label[a]} {stats.fmt_mean_sd(v[key][a])} vs {label[b]} "
      f"{stats.fmt_mean_sd(v[key][b])}, difference {d.mean():+.1f} [{lo:+.1f}, {hi:+.1f}]."
    )
  gap = {arm: np.asarray(v["rescored"][arm]) - np.asarray(v["selection"][arm]) for arm in (a, b)}
  lines.append(
    f"- winner's curse (rescored minus selection FID): {label[a]} "
    f"{stats.fmt_values(gap[a])}, {label[b]} {stats.fmt_values(gap[b])}."
  )
  return lines


def readme_table_v1() -> str:
  """The README block ``pbt_vs_rs_v1``: :func:`table_v1` of the committed JSON and protocol."""
  from experiments import _report

  return table_v1(json.loads(RESULTS_V1.read_text()), _report.load_protocol(PROTOCOL_V1))


def plot_v1(data: dict, path: Path) -> None:
  """Left: best selection FID so far per run; middle: each seed's winner, selection FID
  (1k) and rescored FID (10k); right: the replays (selection-size FID per trial)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  colors = {"pbt": "C0", "random_search": "C1"}
  fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
  for r in data["runs"]:
    c = colors.get(r["arm"], "C2")
    y = np.minimum.accumulate([t[4] for t in sorted(r["trials"])])
    axes[0].plot(np.arange(1, len(y) + 1), y, color=c, alpha=0.5, lw=0.8)
    x = r["seed"] + (-0.12 if r["arm"] == "pbt" else 0.12)
    axes[1].plot([x, x], [r["winner"]["selection_fid"], r["winner"]["rescored_fid"]], color=c)
    axes[1].plot(x, r["winner"]["rescored_fid"], "o", color=c, ms=4)
    axes[1].plot(x, r["winner"]["selection_fid"], "_", color=c, ms=6)
    f = r["replay"]["fids"]
    axes[2].plot(np.arange(1, len(f) + 1), f, color=c, alpha=0.5, lw=0.8)
    axes[2].plot(len(f), r["replay"]["final_fid"], "o", color=c, ms=3)
  by = {(r["arm"], r["seed"]): r["winner"]["rescored_fid"] for r in data["runs"]}
  for (arm, seed), fid in by.items():  # each pair's rescored winners joined
    if arm == "pbt" and ("random_search", seed) in by:
      axes[1].plot([seed - 0.12, seed + 0.12], [fid, by[("random_search", seed)]], "k-", lw=0.5)
  for arm, c in colors.items():
    axes[0].plot([], [], color=c, label=arm)
  axes[0].legend(fontsize=7)
  axes[0].set(title="best selection FID so far", xlabel="trials done", ylabel="FID (1k)")
  axes[1].set(title="winner: selection (-) vs rescored 10k (o)", xlabel="seed", ylabel="FID")
  axes[1].set_xticks(sorted({r["seed"] for r in data["runs"]}))
  axes[2].set(title="replay from scratch (o: 10k)", xlabel="trial", ylabel="FID")
  for ax in axes:
    ax.title.set_fontsize(9)
    ax.set_yscale("log")
  fig.tight_layout()
  fig.savefig(path, dpi=60)
  plt.close(fig)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


if __name__ == "__main__":
  raise SystemExit(main())
