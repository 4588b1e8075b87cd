"""One-line errors for every experiment's command line (``experiments/*/main.py``).

:func:`run` replaces ``absl.app.run(main)``: an exception -- a bad or unknown
config value, a missing or corrupt file, an incompatible resume -- ends the
command with ONE line on stderr, ``ERROR: <what>``, and exit status 1 (2 for a
malformed command line); ``--debug`` or ``MINMAXLAB_DEBUG=1`` shows the full
traceback instead. A workdir the failed command created and left empty is
removed (only one it created: see :func:`_remove_if_empty`); ``--workdir=`` (empty) is
refused rather than read as the current folder.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

from absl import app, flags

DEBUG_ENV = "MINMAXLAB_DEBUG"
_DEBUG = flags.DEFINE_bool(
  "debug", False, f"Show the traceback of an error (also: {DEBUG_ENV}=1) instead of one line."
)


def debug_requested(argv: list[str] | None = None) -> bool:
  """``--debug`` on the command line (read before absl parses it) or ``$MINMAXLAB_DEBUG``."""
  argv = sys.argv if argv is None else argv
  if os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
    return True
  return any(a in ("--debug", "--debug=true", "--debug=True", "--debug=1") for a in argv)


def error_line(e: BaseException) -> str:
  """``<Type>: <first line of the message>`` (at most 300 characters)."""
  text = str(e).strip()
  if isinstance(e, (KeyError, AttributeError)) and text.startswith(("'", '"')):
    text = text.strip("'\"")
  first = text.splitlines()[0] if text else ""
  name = type(e).__name__
  line = f"{name}: {first}" if first else name
  return line[:300]


def _config_file(argv: list[str]) -> str | None:
  """The path given to ``--config`` (without a ``:param`` suffix), if any."""
  for i, a in enumerate(argv):
    value = None
    if a.startswith("--config="):
      value = a.split("=", 1)[1]
    elif a == "--config" and i + 1 < len(argv):
      value = argv[i + 1]
    if value:
      return value.split(":", 1)[0]
  return None


def _config_spec(argv: list[str]) -> str | None:
  """The value given to ``--config`` (with its ``:param`` suffix), if any."""
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      return a.split("=", 1)[1]
    if a == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def config_fields(config) -> list[str]:
  """Every field of an ``ml_collections`` config, nested ones dotted (``classifier.steps``)."""
  out = []
  for key, value in config.items():
    if hasattr(value, "items"):
      out += [f"{key}.{sub}" for sub in config_fields(value)]
    else:
      out.append(key)
  return out


def _load_config(argv: list[str]):
  """``(path, config)`` of the ``--config`` file of ``argv`` (``None`` when there is none or it
  cannot be loaded here)."""
  spec = _config_spec(argv)
  if not spec:
    return None
  path, _, param = spec.partition(":")
  try:
    loader = importlib.util.spec_from_file_location("_minmaxlab_cli_config", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return path, (module.get_config(param) if param else module.get_config())
  except Exception:
    return None


_HELP = ("--help", "-h", "-?", "--helpshort", "--helpfull")


def config_help(argv: list[str]) -> str:
  """The ``--help`` text's last part: every field of the ``--config`` file with its value
  (``--config.<field>=<value>`` changes one), or how to list them."""
  loaded = _load_config(argv)
  if loaded is None:
    return "\nconfig fields: add --config FILE to --help to list the fields of FILE"
  path, config = loaded
  lines = [f"\nconfig fields of {path} (change one with --config.<field>=<value>):"]
  for name in config_fields(config):
    value = config
    for part in name.split("."):
      value = value[part]
    text = repr(value)
    lines.append(f"  --config.{name}={text if len(text) <= 60 else text[:57] + '...'}")
  return "\n".join(lines)


def unknown_field_line(argv: list[str]) -> str | None:
  """One line naming the first ``--config.<field>=`` of ``argv`` that the config file does not
  have, the closest field and every field; ``None`` when the config cannot be loaded here or
  every field given exists."""
  loaded = _load_config(argv)
  if loaded is None:
    return None
  path, config = loaded
  fields = config_fields(config)
  known = set(fields)
  for a in argv:
    if not a.startswith("--config."):
      continue
    name = a[len("--config.") :].split("=", 1)[0]
    if name in known or any(f.startswith(name + ".") for f in known):
      continue
    close = difflib.get_close_matches(name, fields, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown config field: {name}{hint}; the {len(fields)} fields of {path}: " + ", ".join(
      fields
    )
  return None


def _workdir_value(argv: list[str]) -> str | None:
  """The text given to ``--workdir``, if any."""
  for i, a in enumerate(argv):
    if a.startswith("--workdir="):
      return a.split("=", 1)[1]
    if a == "--workdir" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _workdir(argv: list[str]) -> Path | None:
  value = _workdir_value(argv)
  return Path(value) if value and value.strip() else None


def _inside(filename, workdir: Path) -> bool:
  """Whether ``filename`` (an ``OSError``'s) is ``workdir`` or a path in it."""
  if not filename:
    return False
  f, w = Path(os.path.abspath(filename)), Path(os.path.abspath(workdir))
  return f == w or w in f.parents


def _remove_if_empty(path: Path) -> None:
  """Remove ``path`` if this process made it and it holds no file but its lock.

  The lock is taken first (``runner.lock_workdir``, counted if this process holds it): a
  workdir another process holds, or one this process did not make (a user's empty folder,
  the folder of a run that won the lock), is left as it is."""
  from minmaxlab import runner

  try:
    with runner.workdir_lock(path) as created:
      lock = path / ".lock"  # minmaxlab.runner.lock_workdir's file
      if not created or any(p.is_file() and p != lock for p in path.rglob("*")):
        return
      for p in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
      path.rmdir()
  except (OSError, ValueError, runner.WorkdirBusy):
    return


# The flattened size of one example of the data sets (the estimate needs no download).
_DATA_SIZES = {"ring8": 2, "grid25": 2, "digits": 64, "cifar10": 3072}
_BYTES = 4  # float32


def memory_need(config) -> int | None:
  """A rough lower bound of the bytes one process of a run of ``config`` holds at once
  (``None`` when the config has no ``batch_size`` or ``hidden``, or they are not numbers): one
  generator's and one discriminator's MLP parameters (``latent_dim -> hidden -> data`` and
  ``data -> hidden -> 1``) with their gradients, Adam's two moments and two copies (slow
  weights, an extrapolation), plus one batch's activations of both players forward and
  backward. It only has to tell a config that cannot fit from one that might (a coevolution
  grid's cells are counted by its own, finer check)."""
  get = config.get if hasattr(config, "get") else (lambda k, d=None: d)
  try:
    hidden = [int(h) for h in (get("hidden", ()) or ())]
    batch = int(get("batch_size", 0) or 0)
    if not hidden and not batch:
      return None
    data = _DATA_SIZES.get(str(get("dataset", "")), 784)
    latent = int(get("latent_dim", 0) or 0) or 64
  except (TypeError, ValueError):
    return None
  widths = [[latent, *hidden, data], [data, *hidden, 1]]
  params = sum(a * b + b for w in widths for a, b in zip(w, w[1:], strict=False))
  activations = max(batch, 1) * sum(sum(w) for w in widths) * 2
  return (6 * params + activations) * _BYTES


def check_memory(config) -> None:
  """``ValueError`` (one line, before anything is written) when :func:`memory_need` exceeds
  the memory available here (Linux ``MemAvailable``)."""
  need = memory_need(config)
  try:
    with open("/proc/meminfo") as f:
      have = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
  except (OSError, ValueError, IndexError, StopIteration):
    return
  if need is not None and need > have:
    raise ValueError(
      f"config.batch_size={config.get('batch_size')}, config.hidden={config.get('hidden')}"
      f" need at least {need / 2**30:.3g} GiB of memory, more than the {have / 2**30:.1f} GiB"
      " available here; use a smaller batch_size or hidden"
    )


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, a malformed flag (``--timeout=abc``) one line and exit status 2."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f"ERROR: {e} (see --help)", file=sys.stderr, flush=True)
    sys.exit(2)


def run(main: Callable[[list[str]], None]) -> None:
  """``absl.app.run(main)`` with one-line user errors (see the module docstring)."""
  debug = debug_requested()
  config_file = _config_file(sys.argv)
  if config_file is not None and not Path(config_file).is_file() and not debug:
    print(f"ERROR: config file {config_file} not found", file=sys.stderr, flush=True)
    sys.exit(2)
  workdir = _workdir(sys.argv)
  if _workdir_value(sys.argv) is not None and workdir is None:  # not the current folder
    print("ERROR: --workdir is empty; give a folder (--workdir=<folder>)", file=sys.stderr)
    sys.exit(2)
  started = []

  def wrapped(argv):
    started.append(True)
    try:
      if "config" in flags.FLAGS and flags.FLAGS["config"].value is not None:
        check_memory(flags.FLAGS["config"].value)  # before main writes anything
      return main(argv)
    except app.UsageError as e:  # one line, not absl's usage text
      if debug:
        raise
      print(f"ERROR: {e} (see --help)", file=sys.stderr, flush=True)
      sys.exit(2)

  try:
    app.run(wrapped, flags_parser=_parse_flags)
  except SystemExit:
    if not started and any(a in _HELP for a in sys.argv[1:]):  # absl printed its flags
      print(config_help(sys.argv), flush=True)
      sys.exit(0)
    raise
  except KeyboardInterrupt:
    raise
  except Exception as e:
    if workdir is not None:
      _remove_if_empty(workdir)
    if debug:
      raise
    if not started and isinstance(e, (AttributeError, KeyError)):
      line = unknown_field_line(sys.argv) or (
        f"unknown config field or flag: {error_line(e).split(': ', 1)[-1]} (see --help)"
      )
    elif isinstance(e, OSError) and workdir is not None and _inside(e.filename, workdir):
      line = f"the workdir {workdir} cannot be written: {e.strerror or error_line(e)}"
    else:
      line = error_line(e) + ("" if started else " (in the command line; see --help)")
    print(f"ERROR: {line}", file=sys.stderr, flush=True)
    sys.exit(1 if started else 2)
