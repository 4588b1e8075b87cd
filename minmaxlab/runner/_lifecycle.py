"""The life of a run seen from the command line: the compilation cache, compile
messages, Ctrl-C, and what a rerun of the same command does.

* :func:`enable_compilation_cache` turns on JAX's persistent compilation cache, so a
  repeated or resumed run loads its compiled programs instead of compiling them again.
* :func:`report_compilation` prints what XLA is compiling (when it takes longer than a
  second) and how long it took, or that it came from the cache.
* :func:`exit_on_interrupt` makes Ctrl-C end the process at once (even inside a long
  XLA compilation) with one line: how far the run got and the command that continues it.
* :func:`run_status` tells whether a workdir holds nothing, an unfinished run or a
  finished one (what a rerun of the same command does then is the trainers' rule:
  resume the unfinished run, report the finished one).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import jax

from minmaxlab.runner._cache_folder import enable_compilation_cache
from minmaxlab.runner._finish import FINISHED, checkpoint_steps, is_finished

RERUN_ENV = "MINMAXLAB_RERUN"  # the command a user typed (set by dev.py)


def _program_name(name: str) -> str:
  """``name``, and for an anonymous program (``jit(<lambda>)``) where it is called from:
  ``jit(<lambda>) in train (train.py:212)`` (the first frame outside JAX; lowering runs in
  the calling thread)."""
  if "<lambda>" not in name:
    return name
  frame = sys._getframe(1)
  while frame is not None:
    path = frame.f_code.co_filename
    if not any(part in path for part in ("/jax/", "/jaxlib/", "/minmaxlab/runner/", "<frozen")):
      return f"{name} in {frame.f_code.co_name} ({Path(path).name}:{frame.f_lineno})"
    frame = frame.f_back
  return name


class _CompileReporter:
  """Listens to ``jax.monitoring``: lowering a function announces its compilation,
  which is shown once it has run for ``announce_after`` seconds, and its end is shown
  with the time (compiled, or loaded from the persistent cache)."""

  def __init__(self, stream: TextIO | None, announce_after: float, min_seconds: float):
    self.stream, self.announce_after, self.min_seconds = stream, announce_after, min_seconds
    self.enabled = True
    self._lock = threading.Lock()
    self._name: str | None = None
    self._started = 0.0
    self._announced = False
    self._timer: threading.Timer | None = None
    self.log: list[tuple[str, str, float]] = []  # (name, "compiled" | "cached", seconds)

  def _write(self, text: str) -> None:
    stream = self.stream if self.stream is not None else sys.stderr
    stream.write(text + "\n")
    stream.flush()

  def _announce(self, name: str, started: float) -> None:
    with self._lock:
      if self._name != name or self._started != started or not self.enabled:
        return
      self._announced = True
    self._write(f"compiling {name} ...")

  def _begin(self, name: str) -> None:
    with self._lock:
      if self._timer is not None:
        self._timer.cancel()
      self._name, self._started, self._announced = name, time.perf_counter(), False
      self._timer = threading.Timer(self.announce_after, self._announce, (name, self._started))
      self._timer.daemon = True
      self._timer.start()

  def _end(self, how: str, seconds: float) -> None:
    with self._lock:
      if self._name is None:  # a cache hit also reports a (short) backend compile after it
        return
      if self._timer is not None:
        self._timer.cancel()
      name, announced = self._name, self._announced
      self._name, self._timer = None, None
    if how == "cached" or seconds >= self.min_seconds:
      self.log.append((name, how, seconds))
    if not self.enabled:
      return
    if how == "compiled" and (announced or seconds >= self.min_seconds):
      self._write(f"compiled {name} in {seconds:.1f} s")
    elif how == "cached" and (announced or seconds >= self.min_seconds):
      self._write(f"loaded {name} from the compilation cache in {seconds:.2f} s")

  def on_duration(self, event: str, seconds: float, **kw) -> None:
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
      self._begin(_program_name(str(kw.get("fun_name", "a program"))))
    elif event == "/jax/core/compile/backend_compile_duration":
      self._end("compiled", seconds)
    elif event == "/jax/compilation_cache/cache_retrieval_time_sec":
      self._end("cached", seconds)


_REPORTER: _CompileReporter | None = None


def report_compilation(
  stream: TextIO | None = None, announce_after: float = 1.0, min_seconds: float = 1.0
) -> _CompileReporter:
  """Print XLA compilations to ``stream`` (default ``sys.stderr``).

  A compilation still running after ``announce_after`` seconds prints
  ``compiling jit(step) ...``; one that took at least ``min_seconds`` (or was
  announced) prints ``compiled jit(step) in 41.3 s`` or ``loaded jit(step) from the
  compilation cache in 0.05 s``. Installed once per process (later calls change the
  settings); ``report_compilation(...).enabled = False`` silences it.
  """
  global _REPORTER
  if _REPORTER is None:
    _REPORTER = _CompileReporter(stream, announce_after, min_seconds)
    jax.monitoring.register_event_duration_secs_listener(_REPORTER.on_duration)
  else:
    _REPORTER.stream, _REPORTER.announce_after = stream, announce_after
    _REPORTER.min_seconds, _REPORTER.enabled = min_seconds, True
  return _REPORTER


def rerun_command(module: str, argv: list[str] | None = None) -> str:
  """The command that repeats this process: ``$MINMAXLAB_RERUN`` (what ``dev.py`` was
  given) or ``python -m <module> <argv[1:]>``."""
  given = os.environ.get(RERUN_ENV)
  if given:
    return given
  args = list(sys.argv if argv is None else argv)[1:]
  return " ".join(["python", "-m", module, *map(shlex.quote, args)])


def exit_on_interrupt(describe: Callable[[], str], stream: TextIO | None = None) -> None:
  """On SIGINT (Ctrl-C), print ``describe()`` as one line and end the process (status 130).

  Python raises ``KeyboardInterrupt`` only between bytecodes, i.e. after a running
  XLA compilation or computation returns, and the exception's traceback runs through
  whatever was executing. Here the signal is taken by a watcher thread instead (through
  ``signal.set_wakeup_fd``), which reacts at once, prints the line and leaves with
  ``os._exit``. That is safe for runs whose files are written atomically or flushed row
  by row (checkpoints, JSONL), as the trainers' are. Main thread only.
  """
  read_fd, write_fd = os.pipe()
  os.set_blocking(write_fd, False)

  def ignore(signum, frame):  # the watcher thread handles it
    pass

  def watch():
    os.read(read_fd, 1)  # blocks until a signal byte arrives
    try:
      line = describe()
    except Exception as e:  # never a traceback on Ctrl-C
      line = f"interrupted ({type(e).__name__} while describing the run: {e})"
    out = stream if stream is not None else sys.stderr
    try:
      sys.stdout.flush()
      out.write("\n" + line + "\n")
      out.flush()
    finally:
      os._exit(130)

  signal.signal(signal.SIGINT, ignore)
  signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  threading.Thread(target=watch, name="minmaxlab-sigint", daemon=True).start()


def run_status(latest_checkpoint: int | None, total: int) -> str:
  """``"new"`` (no checkpoint), ``"unfinished"`` or ``"finished"`` (the latest
  checkpoint is at ``total`` or beyond)."""
  if latest_checkpoint is None:
    return "new"
  return "finished" if latest_checkpoint >= total else "unfinished"


def interrupted_line(
  unit: str, reached: int, total: int, saved: int | None, command: str, where: str = ""
) -> str:
  """``interrupted at generation 7/40 (saved: generation 5); continue with: <command>``
  (``where``: ``... 7/40 of the run in <where> (...``, a run other than the command's)."""
  saved_text = "nothing saved yet" if saved is None else f"saved: {unit} {saved}"
  place = f" of the run in {where}" if where else ""
  return f"interrupted at {unit} {reached}/{total}{place} ({saved_text}); continue with: {command}"


def finished_run(workdir: str | os.PathLike, total: int) -> dict | None:
  """The last metrics row of the run in ``workdir`` if it has finished ``total`` steps
  (:func:`~minmaxlab.runner.is_finished`: its end products and the finish marker exist),
  else ``None``. Reads only."""
  from minmaxlab.runner._metrics_log import read_jsonl

  if not is_finished(workdir, total):
    return None
  rows = read_jsonl(Path(workdir) / "metrics.jsonl")
  return rows[-1] if rows else {}


def config_changes(workdir: str | os.PathLike, config, may_change=()) -> dict[str, tuple]:
  """Fields of ``config`` that differ from the run's ``workdir/config.json``, as
  ``{field: (saved, now)}``, leaving out ``may_change``, the ``run`` record of
  :func:`run_record` and fields the saved config lacks (added to the code since). Empty
  when there is no saved config and no checkpoint; a ``ValueError`` (one line) when the
  workdir holds checkpoints but its ``config.json`` is gone (a resume with another seed
  would continue the old run silently)."""
  import json

  path = Path(workdir) / "config.json"
  if not path.exists():
    if checkpoint_steps(workdir):
      raise ValueError(
        f"{workdir} holds checkpoints but no config.json, so this config cannot be checked"
        " against the run's; put its config.json back or use a fresh --workdir"
      )
    return {}
  saved = read_config_json(path)
  now = json.loads(config.to_json() if hasattr(config, "to_json") else json.dumps(dict(config)))
  # Fields the saved config lacks were added to the code since: not a change of this run.
  skip = {"run", *may_change}
  keys = set(saved) - skip
  return {k: (saved.get(k), now.get(k)) for k in sorted(keys) if saved.get(k) != now.get(k)}


def read_config_json(path: str | os.PathLike) -> dict:
  """A run's ``config.json`` as a dict; ``ValueError`` naming the file when it is not one
  (a damaged or foreign file: the run cannot be compared, resumed or loaded)."""
  import json

  try:
    saved = json.loads(Path(path).read_text())
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise ValueError(f"{path} is not a readable run config ({type(e).__name__}: {e})") from None
  if not isinstance(saved, dict):
    raise ValueError(f"{path} is not a run config (a JSON object), got {type(saved).__name__}")
  return saved


class Rerun:
  """What a command-line run does with its workdir (see :func:`start_run`).

  Attributes:
    status: ``"new"``, ``"unfinished"`` (to be resumed), ``"finishing"`` (its last step is
      saved, its end products are to be completed) or ``"finished"`` (to be reported).
    saved: the latest checkpoint's step, or ``None``.
    reached: the last step (generation) reported through :meth:`on_log`.
  """

  def __init__(self, status: str, saved: int | None):
    self.status, self.saved, self.reached = status, saved, None

  @property
  def resume(self) -> bool:
    return self.status != "new"

  def on_log(self, step: int, row: dict | None = None) -> None:
    self.reached = int(step)

  def describe(self, workdir, unit: str, total: int, command: str) -> str:
    """The Ctrl-C line: how far the run got, or, while another run of this process trains
    (the main job's baseline), how far that one got and where."""
    from minmaxlab.runner._metrics_log import OPEN_RUNS

    other = OPEN_RUNS[-1] if OPEN_RUNS else None
    if other is not None and other.workdir != Path(workdir).resolve():
      rows = other.writer.rows if other.writer is not None else []
      step_key = other.writer.step_key if other.writer is not None else "step"
      at = int(rows[-1].get(step_key, other.start)) if rows else other.start
      now = checkpoint_steps(other.workdir)
      saved = now[-1] if now else None
      return interrupted_line(unit, at, other.total, saved, command, str(other.workdir))
    now = checkpoint_steps(workdir)
    at = self.reached if self.reached is not None else (now[-1] if now else 0)
    return interrupted_line(unit, at, total, now[-1] if now else None, command)


def start_run(
  workdir: str | os.PathLike,
  config,
  total: int,
  *,
  module: str,
  unit: str = "step",
  may_change=(),
  quiet: bool = False,
  cache: bool = True,
  lock: bool = False,
) -> Rerun:
  """The command-line rule for rerunning a command into the same ``workdir``.

  * nothing there: a new run;
  * a checkpoint before ``total``: the run resumes from it (``total`` may have grown);
  * a checkpoint at ``total`` and the finish marker (:func:`~minmaxlab.runner.is_finished`):
    the run has finished; it is reported and nothing changes;
  * a checkpoint at ``total`` without the marker (a run cut short in its finish): the run
    completes its end products (an intact final checkpoint is not trained again);
  * a saved ``config.json`` that differs in a field outside ``may_change``: ``SystemExit``
    with one line (use another workdir).

  Also makes Ctrl-C end the process with one line (:func:`exit_on_interrupt`, naming
  the ``unit`` reached and ``rerun_command(module)``), and, unless the run has finished,
  turns on the compilation cache and the compile messages. ``quiet`` (e.g. MPI ranks
  other than 0): print nothing. ``lock``: take the workdir's lock
  (:func:`~minmaxlab.runner.lock_workdir`) before looking at it, so that a command refused
  because another holds it says only that.
  """
  if lock:
    from minmaxlab.runner._workdir_lock import lock_workdir

    lock_workdir(workdir)
  steps = checkpoint_steps(workdir)
  saved = steps[-1] if steps else None
  run = Rerun(run_status(saved, total), saved)
  if run.status == "finished" and not is_finished(workdir, total):
    run.status = "finishing"

  def interrupted() -> str:
    return "" if quiet else run.describe(workdir, unit, total, rerun_command(module))

  exit_on_interrupt(interrupted)
  if run.status != "new":
    changed = config_changes(workdir, config, may_change)
    if changed:
      diff = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items())
      raise SystemExit(
        f"ERROR: {workdir} holds a run of another config ({diff}); use a fresh --workdir"
      )
  say = (lambda *a: None) if quiet else (lambda text: print(text, flush=True))
  if run.status == "finished":
    say(f"{workdir}: finished earlier ({unit} {saved}/{total}); nothing changed")
  elif run.status == "unfinished":
    say(f"{workdir}: resuming from {unit} {saved}/{total}")
  elif run.status == "finishing":
    say(f"{workdir}: {unit} {saved}/{total} saved; completing the run's end products")
  if run.status != "finished" and cache:
    enable_compilation_cache()
    report_compilation(stream=open(os.devnull, "w") if quiet else None)
  return run


def run_record(module: str | None = None) -> dict:
  """Where a run's code came from: the minmaxlab and JAX versions, the git commit of
  the source tree (and whether it had uncommitted changes), the command line and the
  module that wrote the run (:func:`load_run` uses it)."""
  import importlib.metadata
  import subprocess

  def version(name):
    try:
      return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      return None

  src = Path(__file__).resolve().parents[2]

  def git(*args):
    try:
      out = subprocess.run(["git", *args], cwd=src, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
      return None
    return out.stdout.strip() if out.returncode == 0 else None

  commit = git("rev-parse", "HEAD")
  status = git("status", "--porcelain", "--untracked-files=no") if commit else None
  return {
    "minmaxlab": version("minmaxlab"),
    "jax": jax.__version__,
    "git_commit": commit,
    "git_dirty": bool(status) if status is not None else None,
    "command": " ".join(map(shlex.quote, sys.argv)),
    "module": module,
    "module_root": _module_root(module),
    "finish_rule": FINISHED,  # finished when this marker exists (runner.is_finished)
  }


def _module_root(module: str | None) -> str | None:
  """The directory that holds ``module``'s top-level package (the entry of ``sys.path`` it was
  found on), so that :func:`load_run` can import the trainer from any working directory;
  ``None`` when ``module`` is not given or not found."""
  import importlib.util

  if not module:
    return None
  try:
    spec = importlib.util.find_spec(module.split(".")[0])
  except (ImportError, ValueError):
    return None
  if spec is None:
    return None
  if spec.submodule_search_locations:  # a package: its folder's parent
    return str(Path(next(iter(spec.submodule_search_locations))).resolve().parent)
  return str(Path(spec.origin).resolve().parent) if spec.origin else None


def write_config(workdir: str | os.PathLike, config, module: str | None = None) -> Path:
  """Write ``workdir/config.json``: the config's fields and a ``run`` record
  (:func:`run_record`, e.g. the package version and git commit)."""
  import json

  d = json.loads(config.to_json() if hasattr(config, "to_json") else json.dumps(dict(config)))
  d["run"] = run_record(module)
  path = Path(workdir) / "config.json"
  tmp = path.with_suffix(".json.tmp")
  tmp.write_text(json.dumps(d, indent=2))
  os.replace(tmp, path)
  return path
