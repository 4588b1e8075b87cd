"""One training run's files in the order every experiment's train loop uses them.

:class:`TrainingRun` is the shared lifecycle of the trainers (the GAN, its lookahead study,
the coevolution grid, the PBT campaign): restore the newest intact checkpoint or start from
the initial state, write ``config.json`` and open the metric writer and the progress bar,
save checkpoints, close the writers and draw ``metrics.png`` (also after an error), then
write ``summary.json`` and, last, the finish marker (:func:`~minmaxlab.runner.finish`).
What a step computes stays in the trainer; only the files are here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from minmaxlab.runner._checkpoint import CheckpointManager
from minmaxlab.runner._finish import fault_point, finish, is_finished, write_json
from minmaxlab.runner._lifecycle import config_changes, write_config
from minmaxlab.runner._metrics_log import OPEN_RUNS, MetricWriter
from minmaxlab.runner._plots import save_metric_curves
from minmaxlab.runner._progress import ProgressBar


def _restore_like(ckpt: CheckpointManager, state: Any) -> Any:
  """The newest intact checkpoint, restored into the shapes of ``state``."""
  return ckpt.restore(jax.eval_shape(lambda: state))[0]


class TrainingRun:
  """The files of one run of ``total`` steps (or generations, trials) in ``workdir``.

  Typical use, in this order::

    run = runner.TrainingRun(workdir, config, config.num_steps, module=__name__)
    state = run.restore_or_init(init(), resume=resume)     # sets run.start
    writer = run.open_writers(resume=resume, tensorboard=config.tensorboard)
    if run.start == 0:
      run.checkpoint(0, state)
    bar = run.open_progress()
    try:
      ...  # writer.write(step, row); run.checkpoint(step, state); bar.update(...)
    finally:
      run.close(curve_keys)                                # metrics.png, also after an error
    run.finish(summary, end_products)                      # summary.json, then the marker

  Args:
    workdir: the run directory (made if missing).
    config: the run's config (``config.json`` and the resume check compare it).
    total: the run's length; a run is finished when the marker says it reached it.
    module: the trainer's module, recorded in ``config.json`` (``load_run`` imports it).
    keep_checkpoints: how many checkpoints ``checkpoints/`` keeps.
    writes: whether this process writes files (``False``: other processes of a
      distributed run, which only take part in the computation).

  Attributes:
    start: the step the loop starts from (0, or the restored checkpoint's).
    writer: the :class:`MetricWriter` (``None`` before :meth:`open_writers` and on a
      process that does not write).
    bar: the :class:`ProgressBar` or ``None``.
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    config: Any,
    total: int,
    *,
    module: str | None = None,
    keep_checkpoints: int | None = 3,
    writes: bool = True,
  ):
    self.workdir = Path(workdir).resolve()
    self.config, self.total, self.module, self.writes = config, int(total), module, writes
    self._keep, self._ckpt = keep_checkpoints, None
    self.start = 0
    self.writer: MetricWriter | None = None
    self.bar: ProgressBar | None = None
    self.workdir.mkdir(parents=True, exist_ok=True)

  @property
  def ckpt(self) -> CheckpointManager:
    """The run's :class:`CheckpointManager` on ``workdir/checkpoints`` (made at first use)."""
    if self._ckpt is None:
      self._ckpt = CheckpointManager(self.workdir / "checkpoints", max_to_keep=self._keep)
    return self._ckpt

  def finished(self) -> bool:
    """Whether the run has finished (:func:`~minmaxlab.runner.is_finished`)."""
    return is_finished(self.workdir, self.total)

  def restore_or_init(
    self,
    state: Any,
    *,
    resume: bool,
    may_change: Sequence[str] | None = None,
    restore: Callable[[CheckpointManager, Any], Any] = _restore_like,
    step_of: Callable[[Any], int] = lambda state: int(state.step),
    before: Callable[[], None] | None = None,
  ) -> Any:
    """``state`` (the initial one) when there is no checkpoint, else the restored one;
    sets :attr:`start` (``step_of`` the restored state).

    A checkpoint without ``resume`` is a ``ValueError`` (one line); with ``may_change``, so
    is a saved ``config.json`` that differs in a field outside it. ``restore(ckpt, state)``
    reads the checkpoint (default: the newest intact one in ``state``'s shapes); ``before``
    runs after the look for a checkpoint and before anything else (e.g. a barrier, so that
    every process has looked before one of them saves).
    """
    latest = self.ckpt.latest_step()
    if before is not None:
      before()
    if latest is None:
      self.start = 0
      return state
    if not resume:
      raise ValueError(
        f"{self.workdir} already holds checkpoints; pass --resume to continue or use a fresh"
        " --workdir"
      )
    if may_change is not None and (
      changed := config_changes(self.workdir, self.config, may_change)
    ):
      diff = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items())
      raise ValueError(
        f"{self.workdir} holds a run of another config ({diff}); use a fresh --workdir"
      )
    state = restore(self.ckpt, state)
    self.start = int(step_of(state))
    return state

  def open_writers(
    self, *, resume: bool, tensorboard: bool, step_key: str = "step"
  ) -> MetricWriter | None:
    """Write ``config.json`` (with the run record) and open the :class:`MetricWriter` (a
    resumed run drops the rows after :attr:`start`). Nothing on a process that does not
    write (returns ``None``)."""
    if not self.writes:
      return None
    write_config(self.workdir, self.config, module=self.module)
    self.writer = MetricWriter(
      self.workdir,
      tensorboard=tensorboard,
      resume_step=self.start if resume else None,
      step_key=step_key,
    )
    OPEN_RUNS.append(self)
    return self.writer

  def open_progress(self, **options) -> ProgressBar | None:
    """The :class:`ProgressBar` from :attr:`start` to ``total`` (``options``: its own, e.g.
    ``unit``); ``None`` on a process that does not write. Open it right before the loop:
    its first rate counts from here."""
    if self.writes:
      self.bar = ProgressBar(self.total, start=self.start, **options)
    return self.bar

  def last_row(self) -> dict:
    """The last metrics row written before this process (a finish cut short: its row)."""
    return dict(self.writer.rows[-1]) if self.writer is not None and self.writer.rows else {}

  def checkpoint(self, step: int, state: Any) -> None:
    """Save ``state`` as checkpoint ``step`` (on the process that writes), the metrics
    written so far flushed first."""
    if self.writes:
      if self.writer is not None:
        self.writer.flush()
      self.ckpt.save(step, state)

  def close(
    self,
    curves: Sequence[str] | Callable[[list[dict]], Sequence[str]] | None = None,
    titles: Mapping[str, str] | None = None,
  ):
    """Close the progress bar and the writer and draw ``metrics.png`` from every row
    written (``curves``: its keys, or a function of the rows giving them; ``None``: every
    numeric metric; ``titles``: panel titles by key). Call it in a ``finally``: the curves
    are drawn after an error too."""
    if self in OPEN_RUNS:
      OPEN_RUNS.remove(self)
    if self.bar is not None:
      self.bar.close()
    rows: list[dict] = []
    if self.writer is not None:
      self.writer.close()
      rows = self.writer.rows
    fault_point("finish:figures")
    if rows:
      keys = curves(rows) if callable(curves) else curves
      save_metric_curves(self.workdir / "metrics.png", rows, keys, titles=titles)

  def finish(
    self, summary: dict, products: Sequence[str], *, mark: bool = True, indent: int | None = 2
  ) -> None:
    """Write ``summary.json`` and then (``mark``) the finish marker with ``products``, the
    files a finished run has (:func:`~minmaxlab.runner.finish`). Nothing on a process that
    does not write."""
    if not self.writes:
      return
    fault_point("finish:summary")
    write_json(self.workdir / "summary.json", summary, indent=indent)
    if mark:
      finish(self.workdir, self.total, products)
