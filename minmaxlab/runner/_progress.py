"""Progress of a training loop: step (or generation), losses, throughput, ETA, latest metric."""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any, TextIO


def _fmt(v: Any) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return str(v)


def _columns(stream) -> int | None:
  """The width of the terminal ``stream`` writes to (``None`` when it has no terminal size)."""
  try:
    return os.get_terminal_size(stream.fileno()).columns
  except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
    return None


class ProgressBar:
  """Progress for a loop of ``total`` steps, with the time left (ETA).

  On a terminal it is a `tqdm <https://github.com/tqdm/tqdm>`_ bar (redrawn in place,
  rate and ETA by tqdm) of ``width`` characters, with the values and metrics after it cut
  to the terminal's width (they never squeeze the bar); otherwise (logs, CI, pipes, a
  terminal that reports 0 columns) it prints one plain line per ``update``. The plain
  line's ETA extrapolates the time per step measured since the first update, so the
  first, compiling, chunk does not inflate it; ``steps/s`` is measured between updates
  (the first chunk shows as slow).

  Args:
    total: the last step.
    start: the first step (when resuming).
    stream: where to write (default ``sys.stderr``).
    width: the bar's characters on a terminal.
    unit: what one step is called (``"step"``, ``"generation"``).
    label: what runs (``"baseline"``), shown before the bar and each plain line.
    rate_unit: what the rate counts (default ``unit + "s"``).
    work_per_unit: rate units per step (e.g. cell-steps per generation).
  """

  def __init__(
    self,
    total: int,
    start: int = 0,
    stream: TextIO | None = None,
    width: int = 24,
    unit: str = "step",
    rate_unit: str | None = None,
    work_per_unit: float = 1,
    label: str = "",
  ):
    self.total, self.width, self.label = int(total), int(width), label
    self.unit, self.work_per_unit = unit, work_per_unit
    self.rate_unit = rate_unit if rate_unit is not None else unit + "s"
    self.stream = stream if stream is not None else sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.tty = self.tty and _columns(self.stream) != 0  # 0 columns: a terminal without a size
    self._last_step, self._last_time = int(start), time.perf_counter()
    self._first: tuple[int, float] | None = None  # (step, time) of the first update
    self.latest: dict[str, Any] = {}  # the metrics last given, at self._latest_step
    self._latest_step: int | None = None
    self._bar = None
    if self.tty:
      from tqdm import tqdm

      self._bar = tqdm(
        total=self.total,
        initial=int(start),
        file=self.stream,
        unit=unit,
        desc=label or None,
        bar_format=f"{{l_bar}}{{bar:{self.width}}}{{r_bar}}",
      )

  def eta(self, step: int, now: float | None = None) -> float | None:
    """Seconds left at ``step`` by the pace since the first update (``None`` before it)."""
    if self._first is None or step <= self._first[0]:
      return None
    now = time.perf_counter() if now is None else now
    per_step = (now - self._first[1]) / (step - self._first[0])
    return max(self.total - step, 0) * per_step

  def update(
    self,
    step: int,
    values: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    seconds: float | None = None,
  ) -> str:
    """Show ``step`` with ``values`` (e.g. losses); ``metrics`` are kept as the latest, and
    shown on later lines after ``(evaluated at step N)``, the step they were measured at.

    ``seconds``: the measured compute time since the last update (shown, and used
    for the rate instead of the wall time between updates).
    """
    from tqdm import tqdm

    now = time.perf_counter()
    elapsed = (now - self._last_time) if seconds is None else seconds
    rate = (step - self._last_step) * self.work_per_unit / max(elapsed, 1e-9)
    eta = self.eta(step, now)
    if self._first is None:
      self._first = (int(step), now)
    done = step - self._last_step
    self._last_step, self._last_time = step, now
    if metrics:
      self.latest, self._latest_step = dict(metrics), int(step)
    parts = [f"{k}={_fmt(v)}" for k, v in (values or {}).items()]
    if self.latest and self._latest_step != int(step):  # not measured now: say when it was
      parts.append(f"(evaluated at {self.unit} {self._latest_step})")
    parts += [f"{k}={_fmt(v)}" for k, v in self.latest.items()]
    timing = "" if seconds is None else f"{seconds:.2f} s | "
    eta_text = "" if eta is None else f" | ETA {tqdm.format_interval(eta)}"
    text = (
      f"{self.label + ' | ' if self.label else ''}{self.unit} {step}/{self.total} | {timing}"
      f"{rate:.1f} {self.rate_unit}/s{eta_text} | " + " ".join(parts)
    )
    if self._bar is not None:
      self._bar.set_postfix_str("", refresh=False)
      self._bar.update(done)  # (redraws at most every tqdm's mininterval)
      self._bar.set_postfix_str(self._fit(" ".join(parts)))
    else:
      self.stream.write(text + "\n")
      self.stream.flush()
    return text

  def _fit(self, postfix: str) -> str:
    """``postfix`` cut to what the terminal leaves after the bar's own line."""
    columns = _columns(self.stream)
    if columns is None:  # no terminal size to fit
      return postfix
    meter = self._bar.format_meter(**{**self._bar.format_dict, "ncols": None})
    room = columns - len(meter) - 8  # ", " and a rate that grows
    if len(postfix) <= room:
      return postfix
    return postfix[: room - 1] + "…" if room >= 8 else ""

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
