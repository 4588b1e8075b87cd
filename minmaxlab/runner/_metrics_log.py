"""Metrics to a JSONL file and TensorBoard event files."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from minmaxlab.runner._tensorboard import EventFileWriter

# The training runs (``TrainingRun``) of this process whose writers are open, newest last: the
# newest is what Ctrl-C reports (``Rerun.describe``), e.g. the main job's baseline as it trains.
OPEN_RUNS: list[Any] = []


def _plain(value: Any) -> Any:
  """A JSON-able Python value; NaN and infinities become ``None`` (JSON ``null``: JSON
  has no literal for them, and ``NaN`` tokens break strict parsers)."""
  if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__"):
    value = np.asarray(value)
    value = value.item() if value.size == 1 else value.tolist()
  if isinstance(value, float) and not math.isfinite(value):
    return None
  if isinstance(value, list):
    return [_plain(v) for v in value]
  return value


def _read_rows(path: Path) -> tuple[list[dict], list[str]]:
  """The rows of a JSONL metrics file and its lines that are not a JSON object (a line
  damaged in the middle, or the last one cut short by a kill)."""
  rows, bad = [], []
  if not path.exists():
    return rows, bad
  for line in path.read_text(errors="replace").splitlines():
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      row = None
    if isinstance(row, dict):
      rows.append(row)
    else:
      bad.append(line)
  return rows, bad


def read_jsonl(path: str | os.PathLike) -> list[dict]:
  """All rows of a JSONL metrics file; a line that is not a JSON object (damaged, or cut
  short by a kill) is skipped and every row after it kept."""
  return _read_rows(Path(path))[0]


def _row_step(row: dict, step_key: str = "step") -> int:
  """A metrics row's counter: ``row[step_key]``, else ``row["step"]`` (older files), else 0."""
  return int(row.get(step_key, row.get("step", 0)))


class MetricWriter:
  """Write ``{"step": s, **metrics}`` rows (``step_key`` names the counter, e.g.
  ``"generation"``) to ``workdir/metrics.jsonl`` and TensorBoard.

  Each ``write`` appends one JSON line (flushed; NaN/inf as ``null``) and, with
  ``tensorboard``, the numbers as TensorBoard scalars in ``workdir/tensorboard``
  (tensorboardX; written to disk at least every 10 s, at :meth:`flush`, which every
  checkpoint of a ``TrainingRun`` calls first, and at :meth:`close`: a row costs no
  ``fsync``). :meth:`write_runs` adds scalars of named sub-runs (e.g. one per
  grid cell, overlaid in TensorBoard with the main run's curves of the same tag) and
  :meth:`image` an image. To continue a
  run from a checkpoint at step ``s``, pass ``resume_step=s``: rows after
  ``s`` (written by the killed run after its last checkpoint) are dropped, so
  the file of a resumed run equals that of an uninterrupted one. A line of the old file
  that is not a JSON object (damaged) is appended to ``<filename>.bad`` and every row
  after it kept.

  Args:
    workdir: the run directory.
    tensorboard: also write TensorBoard scalars (numbers only).
    resume_step: keep only existing rows with ``step <= resume_step``;
      ``None`` starts a new file.
    filename: name of the JSONL file.
    step_key: the rows' counter field (``"step"``; coevolution writes ``"generation"``).
      Existing rows that have ``"step"`` instead (files written before) are read too.
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    tensorboard: bool = True,
    resume_step: int | None = None,
    filename: str = "metrics.jsonl",
    step_key: str = "step",
  ):
    self.step_key = step_key
    self.workdir = Path(workdir)
    self.workdir.mkdir(parents=True, exist_ok=True)
    self.path = self.workdir / filename
    rows, bad = _read_rows(self.path) if resume_step is not None else ([], [])
    if bad:  # kept aside, never silently dropped
      with open(self.path.with_name(self.path.name + ".bad"), "a") as f:
        f.write("".join(line + "\n" for line in bad))
    rows = [r for r in rows if _row_step(r, step_key) <= resume_step] if rows else []
    tmp = self.path.with_suffix(".jsonl.tmp")
    with open(tmp, "w") as f:
      for r in rows:
        f.write(json.dumps(r) + "\n")
    os.replace(tmp, self.path)
    self.rows = rows
    self._f = open(self.path, "a")
    # A resumed run writes the steps after its checkpoint again: TensorBoard purges the old ones.
    self._purge = None if resume_step is None else int(resume_step) + 1
    self._tb = EventFileWriter(self.workdir / "tensorboard", self._purge) if tensorboard else None
    self._runs: dict[str, EventFileWriter] = {}

  def write(self, step: int, metrics: dict[str, Any]) -> dict:
    """Append one row; returns it (plain Python values)."""
    row = {self.step_key: int(step), **{k: _plain(v) for k, v in metrics.items()}}
    self._f.write(json.dumps(row) + "\n")
    self._f.flush()
    self.rows.append(row)
    if self._tb is not None:
      nums = {
        k: float(v)
        for k, v in row.items()
        if k != self.step_key and isinstance(v, (int, float)) and not isinstance(v, bool)
      }
      self._tb.scalars(step, nums)
    return row

  def write_runs(self, step: int, runs: dict[str, dict[str, float]]) -> None:
    """TensorBoard scalars of sub-runs ``{run: {tag: value}}``, each run in
    ``tensorboard/<run>`` (e.g. ``cells/r0c1``); nothing without ``tensorboard``."""
    if self._tb is None:
      return
    for name, values in runs.items():
      if name not in self._runs:
        self._runs[name] = EventFileWriter(self._tb.logdir / name, self._purge)
      self._runs[name].scalars(step, values)

  def flush(self) -> None:
    """Every row and TensorBoard event written so far on disk (a checkpoint calls it first:
    what a resume keeps is never lost)."""
    self._f.flush()
    for w in (self._tb, *self._runs.values()):
      if w is not None:
        w.flush()

  def image(self, step: int, tag: str, image) -> None:
    """A TensorBoard image (an array or a PNG path, see ``EventFileWriter.image``)."""
    if self._tb is not None:
      self._tb.image(step, tag, image)
      self._tb.flush()

  def close(self) -> None:
    if not self._f.closed:
      self._f.close()
    if self._tb is not None:
      self._tb.close()
    for w in self._runs.values():
      w.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
