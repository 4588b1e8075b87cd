"""What a PBT campaign shows and writes about its population: a status line and the
population table as trials finish (:class:`Progress`), every trial's lineage row
(``lineage.jsonl``) and each member's lineage plotted (``lineages.png``)."""

from __future__ import annotations

import numpy as np

from minmaxlab import pbt


def lineage_rows(store: pbt.Store, task) -> list[dict]:
  return [
    {
      "trial": t.id,
      "member": t.member,
      "parent": t.parent_id,
      "start_step": t.start_step,
      "steps": t.steps,
      "seed": t.seed,
      "attempt": t.attempt,
      "worker": t.worker,
      "fitness": t.fitness,
      "checkpoint_kept": not t.ckpt_deleted,
      **t.hparams,
      **task.describe(t.hparams),
    }
    for t in store.trials()
  ]


def plot_lineages(path, store: pbt.Store, task) -> None:
  """Each current member's lineage: learning rates (schedule applied) and fitness over steps."""
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
  for member, tid in sorted(store.population().items()):
    chain = store.lineage(tid)
    steps = [np.arange(c.start_step, c.start_step + c.steps) for c in chain]
    series = [task.schedules(c.hparams, st) for c, st in zip(chain, steps)]
    for ax, name in zip(axes[:2], series[0]):
      ax.plot(np.concatenate(steps), np.concatenate([s[name] for s in series]), label=f"m{member}")
      ax.set_yscale("log")
      ax.set_title(f"{name} along each lineage")
    axes[2].plot([c.start_step + c.steps for c in chain], [c.fitness for c in chain], marker="o")
    axes[2].set_title("fitness along each lineage")
  for ax in axes:
    ax.set_xlabel("step")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=80)
  plt.close(fig)


def format_value(v) -> str:
  """A value for a table or a log line: ``-`` for None, a float with 3 decimals (or 3
  significant digits in exponent form outside [0.01, 1e4)), anything else as ``str``."""
  if v is None:
    return "-"
  if isinstance(v, float):
    return f"{v:.3f}" if 1e-2 <= abs(v) < 1e4 or v == 0 else f"{v:.2e}"
  return str(v)


def population_table(rows: list[dict], task) -> str:
  """The current population as fixed-width text, one line per member: its newest
  trial, that trial's parent, status and hyperparameters (as used), and the
  member's last fitness. Plain text: it reads the same in a terminal and a log."""
  described = [task.describe(r["hparams"]) for r in rows]
  names = list(described[0]) if rows else []
  header = ["member", "trial", "parent", "status", "fitness", *names]
  fmt = format_value
  table = [header] + [
    [str(r["member"]), str(r["trial"]), fmt(r["parent"]), r["status"], fmt(r["fitness"])]
    + [fmt(d[n]) for n in names]
    for r, d in zip(rows, described)
  ]
  widths = [max(len(row[i]) for row in table) for i in range(len(header))]
  return "\n".join("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in table)


def status_line(status: dict, num_trials: int) -> str:
  best = status["best_fitness"]
  best_text = "-" if best is None else f"{format_value(best)} (trial {status['best_trial']})"
  return (
    f"trials done {status['done']}/{num_trials}, running {status['running']}, "
    f"pending {status['pending']}, best fitness {best_text}, "
    f"checkpoints {status['checkpoints']}"
  )


class Progress:
  """``on_progress``: a status line whenever it changes, and the population table
  whenever a trial finishes (so a log shows each step of the population)."""

  def __init__(self, controller, num_trials, task, log):
    self.controller, self.num_trials, self.task, self.log = controller, num_trials, task, log
    self.line, self.done = None, -1

  def __call__(self, status):
    line = status_line(status, self.num_trials)
    if line != self.line:
      self.log(line)
      self.line = line
    if status["done"] != self.done:
      self.done = status["done"]
      self.log(population_table(self.controller.population_rows(), self.task))
