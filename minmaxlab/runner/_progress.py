"""A live progress line: step, losses, steps/s and the latest metric."""

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
  """

  def __init__(self, total: int, start: int = 0, stream: TextIO | None = None, width: int = 24):
    self.total, self.width = int(total), width
    self.stream = stream if stream is not None else sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self._last_step, self._last_time = int(start), time.perf_counter()
    self.latest: dict[str, Any] = {}

  def update(
    self, step: int, values: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None
  ) -> str:
    """Show ``step`` with ``values`` (e.g. losses); ``metrics`` are kept as the latest."""
    now = time.perf_counter()
    rate = (step - self._last_step) / max(now - self._last_time, 1e-9)
    self._last_step, self._last_time = step, now
    if metrics:
      self.latest = dict(metrics)
    parts = [f"{k}={_fmt(v)}" for k, v in {**(values or {}), **self.latest}.items()]
    text = f"step {step}/{self.total} | {rate:.1f} steps/s | " + " ".join(parts)
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
