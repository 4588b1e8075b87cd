"""A live progress line: step (or generation), losses, throughput and the latest metric."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _fmt(v: Any) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return str(v)


class ProgressBar:
  """Progress for a loop of ``total`` steps.

  On a terminal it redraws one line (``\\r``) with a bar; otherwise (logs,
  CI, pipes) it prints one plain line per ``update``. ``steps/s`` is measured
  between updates (so the first, compiling, chunk shows as slow).

  Args:
    total: the last step.
    start: the first step (when resuming).
    stream: where to write (default ``sys.stderr``).
    width: characters of the bar on a terminal.
    unit: what one step is called (``"step"``, ``"generation"``).
    rate_unit: what the rate counts (default ``unit + "s"``).
    work_per_unit: rate units per step (e.g. cell-steps per generation).
  """

  def __init__(self, total: int, start: int = 0, stream: TextIO | None = None, width: int = 24,
               unit: str = "step", rate_unit: str | None = None, work_per_unit: float = 1):
    self.total, self.width = int(total), width
    self.unit, self.work_per_unit = unit, work_per_unit
    self.rate_unit = rate_unit if rate_unit is not None else unit + "s"
    self.stream = stream if stream is not None else sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self._last_step, self._last_time = int(start), time.perf_counter()
    self.latest: dict[str, Any] = {}

  def update(
    self,
    step: int,
    values: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    seconds: float | None = None,
  ) -> str:
    """Show ``step`` with ``values`` (e.g. losses); ``metrics`` are kept as the latest.

    ``seconds``: the measured compute time since the last update (shown, and used
    for the rate instead of the wall time between updates).
    """
    now = time.perf_counter()
    elapsed = (now - self._last_time) if seconds is None else seconds
    rate = (step - self._last_step) * self.work_per_unit / max(elapsed, 1e-9)
    self._last_step, self._last_time = step, now
    if metrics:
      self.latest = dict(metrics)
    parts = [f"{k}={_fmt(v)}" for k, v in {**(values or {}), **self.latest}.items()]
    timing = "" if seconds is None else f"{seconds:.2f} s | "
    text = (f"{self.unit} {step}/{self.total} | {timing}{rate:.1f} {self.rate_unit}/s | "
            + " ".join(parts))
    if self.tty:
      done = int(self.width * min(step / max(self.total, 1), 1.0))
      bar = "#" * done + "-" * (self.width - done)
      self.stream.write(f"\r[{bar}] {text}\x1b[K")
    else:
      self.stream.write(text + "\n")
    self.stream.flush()
    return text

  def close(self) -> None:
    if self.tty:
      self.stream.write("\n")
      self.stream.flush()
