"""When a run is finished: its end products exist, and a marker written after them says so.

The finish rule shared by every trainer (GAN, coevolution and its main job, PBT):

* a run of ``total`` steps (generations, trials) is *finished* only when
  ``<workdir>/finished.json`` exists, records a ``total`` of at least ``total``, and every
  end product it lists still exists (paths relative to the workdir, e.g. the final
  checkpoint's digest file, ``summary.json``, ``metrics.png``, the main job's comparison);
* :func:`finish` checks the products and writes the marker last, atomically (a temporary
  file, ``fsync``, ``os.replace``), so a process killed at any point of its finish leaves
  no marker, and the same command again completes the end products (a trainer whose final
  checkpoint is intact does not train again);
* runs written before the marker existed (their ``config.json`` has no
  ``run.finish_rule``) count as finished when their ``summary.json`` exists and their
  newest checkpoint is at ``total`` (the products were then written in that order,
  ``summary.json`` last).

:func:`fault_point` marks the points of a finish at which the fault-injection tests stop
the process (``$MINMAXLAB_FAULT``); it does nothing otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FINISHED = "finished.json"  # the marker, in the workdir
FAULT_ENV = "MINMAXLAB_FAULT"  # tests: ``<point>`` or ``<point>#<k>`` (its k-th pass)
_PASSES: dict[str, int] = {}


def _kill() -> None:  # tests replace it to stop in-process
  os.kill(os.getpid(), signal.SIGKILL)


def fault_point(name: str) -> None:
  """Fault injection: SIGKILL this process when ``$MINMAXLAB_FAULT`` is ``name`` (its first
  pass) or ``name#k`` (its ``k``-th pass in this process). Nothing otherwise."""
  want = os.environ.get(FAULT_ENV)
  if not want or want.split("#")[0] != name:
    return
  _PASSES[name] = _PASSES.get(name, 0) + 1
  k = int(want.split("#")[1]) if "#" in want else 1
  if _PASSES[name] == k:
    _kill()


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 2) -> Path:
  """Write ``data`` as JSON to ``path`` atomically: the old file or the new one, never half."""
  path = Path(path)
  tmp = path.with_name(f".tmp-{path.name}-{uuid.uuid4().hex[:8]}")
  with open(tmp, "w") as f:
    f.write(json.dumps(data, indent=indent))
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return path


def read_marker(workdir: str | os.PathLike) -> dict | None:
  """The finish marker of ``workdir`` (``{"total": ..., "products": [...]}``) or ``None``
  (none, or unreadable: a run with a damaged marker is not finished)."""
  try:
    marker = json.loads((Path(workdir) / FINISHED).read_text())
  except (OSError, ValueError):
    return None
  ok = isinstance(marker, dict) and isinstance(marker.get("total"), int)
  return marker if ok and isinstance(marker.get("products"), list) else None


def missing_products(workdir: str | os.PathLike, products: Iterable[str]) -> list[str]:
  """The ``products`` (relative to ``workdir``) that do not exist."""
  return [p for p in products if not (Path(workdir) / p).exists()]


def _marker_era(workdir: Path) -> bool:
  """Whether the run's ``config.json`` was written by code that writes the marker (its ``run``
  record has ``finish_rule``, :func:`~minmaxlab.runner.run_record`)."""
  try:
    record = json.loads((workdir / "config.json").read_text()).get("run") or {}
  except (OSError, ValueError, AttributeError):
    return False
  return isinstance(record, dict) and record.get("finish_rule") == FINISHED


def checkpoint_steps(workdir: str | os.PathLike) -> list[int]:
  """Steps of the checkpoints in ``workdir/checkpoints`` (read only: creates nothing)."""
  folder = Path(workdir) / "checkpoints"
  if not folder.is_dir():
    return []
  out = []
  for p in folder.iterdir():
    name = p.name
    if name.startswith("step_") and name[5:].isdigit() and p.is_dir():
      out.append(int(name[5:]))
  return sorted(out)


def is_finished(workdir: str | os.PathLike, total: int, products: Iterable[str] = ()) -> bool:
  """Whether the run in ``workdir`` finished ``total`` steps (see the module docstring):
  its marker records ``total`` or more and every product it lists, and every one of
  ``products``, exists. Reads only."""
  workdir = Path(workdir)
  marker = read_marker(workdir)
  if marker is None:
    if (workdir / FINISHED).exists():
      return False  # damaged marker
    if _marker_era(workdir):
      return False
    steps = checkpoint_steps(workdir)  # a run written before the marker existed
    legacy = (workdir / "summary.json").is_file() and bool(steps) and steps[-1] >= total
    return legacy and not missing_products(workdir, products)
  if marker["total"] < int(total):
    return False  # a continuation (a larger total) has not finished yet
  return not missing_products(workdir, [*marker["products"], *products])


def finish(workdir: str | os.PathLike, total: int, products: Iterable[str]) -> Path:
  """Declare the run in ``workdir`` finished at ``total``: every one of ``products``
  (relative paths) must exist (``FileNotFoundError`` naming the first missing one);
  then the marker is written, atomically, as the finish's last write."""
  workdir, products = Path(workdir), [str(p) for p in products]
  missing = missing_products(workdir, products)
  if missing:
    raise FileNotFoundError(f"{workdir}: cannot finish the run: {missing[0]} is missing")
  fault_point("finish:marker")
  return write_json(workdir / FINISHED, {"total": int(total), "products": products})


def checkpoint_product(step: int) -> str:
  """The end product of a final checkpoint: its digest file, written once orbax has
  committed the step (:class:`~minmaxlab.runner.CheckpointManager`)."""
  return f"checkpoints/step_{int(step)}/sha256.json"


def saved_summary(workdir: str | os.PathLike, counter: str, total: int) -> dict | None:
  """``<workdir>/summary.json`` if it is whole and describes the end of this run
  (``summary[counter] == total``, e.g. ``"steps"``), else ``None``: a finish cut short
  after its summary keeps it (its timings cannot be measured again)."""
  try:
    summary = json.loads((Path(workdir) / "summary.json").read_text())
  except (OSError, ValueError):
    return None
  return summary if isinstance(summary, dict) and summary.get(counter) == total else None
