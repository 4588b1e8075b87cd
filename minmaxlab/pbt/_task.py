"""Named PBT tasks: an importable ``"module:function"`` plus JSON arguments.

Worker processes, external workers and MPI ranks never receive code: the store
holds the task's *name* and its JSON arguments, and each worker imports the
module and calls ``function(**args)`` itself, so a worker runs only code that is
installed where it runs. ``function(**args)`` returns either an object with
``init(trial)`` and ``train(hparams, state, trial)`` methods or a pair
``(init_fn, train_fn)``.

Only functions marked with :func:`named_task` can be named: a store written by
someone else can make a worker import an installed module, but it cannot make
it call ``os.system`` or any other function that is not declared a PBT task, and a
worker never imports a module from the run's folder (:func:`resolve_task`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

_MARK = "__minmaxlab_pbt_task__"


def named_task(fn: Callable) -> Callable:
  """Declare ``fn`` (a function or class) a PBT task that a store may name.

  Example:
    >>> @named_task
    ... def quadratic(dim=4):
    ...   return init_fn, train_fn
    >>> # Controller(workdir, space, "mypackage.tasks:quadratic", {"dim": 8}, config=...)
  """
  setattr(fn, _MARK, True)
  return fn


_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class TaskSpec(NamedTuple):
  """A task by name: ``target`` ``"package.module:function"``, ``args`` its JSON kwargs."""

  target: str
  args: dict

  def to_json(self) -> dict:
    return {"target": self.target, "args": self.args}


def _check_json(value: Any, where: str) -> None:
  if value is None or isinstance(value, (bool, int, str)):
    return
  if isinstance(value, float):
    if not math.isfinite(value):
      raise ValueError(f"{where}: {value!r} is not a finite JSON number")
    return
  if isinstance(value, (list, tuple)):
    for i, v in enumerate(value):
      _check_json(v, f"{where}[{i}]")
    return
  if isinstance(value, Mapping):
    for k, v in value.items():
      if not isinstance(k, str):
        raise ValueError(f"{where}: key {k!r} is not a string")
      _check_json(v, f"{where}.{k}")
    return
  raise ValueError(f"{where}: {type(value).__name__} is not JSON data (numbers, strings, lists)")


def task_spec(target: str, args: Mapping[str, Any] | None = None) -> TaskSpec:
  """Validate a task name and its arguments (JSON data only) and return a :class:`TaskSpec`.

  Raises:
    ValueError: ``target`` is not ``"module:function"`` or ``args`` holds
      anything but JSON data.
  """
  if not isinstance(target, str) or not _NAME.match(target):
    raise ValueError(f"a PBT task is named 'package.module:function', got {target!r}")
  args = {} if args is None else dict(args)
  _check_json(args, "task_args")
  return TaskSpec(target, json.loads(json.dumps(args)))


def _inside(path: str | os.PathLike, folder: Path) -> bool:
  p = Path(path or os.curdir).resolve()
  return p == folder or folder in p.parents


@contextmanager
def _path_without(folder: Path | None) -> Iterator[None]:
  """``sys.path`` without its entries inside ``folder`` (``""``: the current directory) for
  the block."""
  saved = list(sys.path)
  if folder is not None:
    sys.path[:] = [p for p in saved if not _inside(p, folder)]
  try:
    yield
  finally:
    sys.path[:] = saved


_RUN_MARKS = (".lock", "pbt.sqlite", "finished.json")  # files that make a folder a run's


def _check_location(target: str, name: str, spec, folder: Path | None, root: Path | None) -> None:
  """Refuse (``ValueError``) the module or package ``name`` found as ``spec`` unless it is a
  regular module file outside ``folder`` (the run's) and outside any run's folder below
  ``root`` (the folder holding the top-level package; it too must not be a run's)."""
  if spec.origin in ("built-in", "frozen"):
    return
  if spec.origin is None or not os.path.isfile(spec.origin):
    raise ValueError(
      f"PBT task {target!r}: {name} is not a module file (a namespace package: a folder"
      " without __init__.py); refusing to import it"
    )
  path = Path(spec.origin).resolve()
  if folder is not None and _inside(path, folder):
    raise ValueError(
      f"PBT task {target!r}: {name} lies in the run's folder {folder} (data, not code);"
      " refusing to import it"
    )
  for d in path.parents:
    if any((d / mark).exists() for mark in _RUN_MARKS):
      raise ValueError(
        f"PBT task {target!r}: {name} lies in a run's folder {d} (data, not code);"
        " refusing to import it"
      )
    if root is None or d == root:
      break


def _locate(target: str, module_name: str, folder: Path | None) -> None:
  """Find ``module_name`` and each package above it on the current ``sys.path`` without
  running any of them (the top level through the import system's finders, each level below
  in its parent's folders only) and check each (:func:`_check_location`)."""
  parts = module_name.split(".")
  spec = importlib.util.find_spec(parts[0])  # a top-level name: no parent is imported
  if spec is None:
    raise ImportError(f"No module named {parts[0]!r}")
  root = None
  if spec.origin not in (None, "built-in", "frozen"):
    top = Path(spec.origin).resolve()
    root = top.parent.parent if spec.submodule_search_locations else top.parent
  for i in range(1, len(parts) + 1):
    name = ".".join(parts[:i])
    _check_location(target, name, spec, folder, root)
    if i == len(parts):
      return
    if not spec.submodule_search_locations:
      raise ImportError(f"{name!r} is not a package")
    child = ".".join(parts[: i + 1])
    spec = importlib.machinery.PathFinder.find_spec(child, list(spec.submodule_search_locations))
    if spec is None:
      raise ImportError(f"No module named {child!r}")


def _import(target: str, module_name: str, workdir: str | os.PathLike | None):
  """Import ``module_name``; with ``workdir``, never from inside it or any run's folder, and
  only once it is found and checked (see :func:`resolve_task`)."""
  folder = None if workdir is None else Path(workdir).expanduser().resolve()
  with _path_without(folder):
    try:
      if folder is not None:  # locate the module and its packages without running them
        _locate(target, module_name, folder)
      return importlib.import_module(module_name)
    except ImportError as e:
      raise ValueError(f"PBT task {target!r}: cannot import {module_name!r}: {e}") from e


def resolve_task(
  spec: TaskSpec, workdir: str | os.PathLike | None = None
) -> tuple[Callable, Callable]:
  """Import ``spec.target``, call it with ``spec.args``; return ``(init_fn, train_fn)``.

  ``workdir``: the run's folder, which holds data that anyone with access to the store may
  have written (a store from a worker, ``replay``, an MPI rank): the module is imported with
  every ``sys.path`` entry inside that folder left out (the current directory too, when a
  worker starts there), and only after the module and each package above it have been found
  (without running any of them) as regular files (no namespace package) outside that folder
  and outside any other run's folder (one holding ``.lock``, ``pbt.sqlite`` or
  ``finished.json``) below the folder of its top-level package.
  """
  module_name, _, attr = spec.target.partition(":")
  obj: Any = _import(spec.target, module_name, workdir)
  for part in attr.split("."):
    if not hasattr(obj, part):
      raise ValueError(f"PBT task {spec.target!r}: {module_name} has no {attr!r}")
    obj = getattr(obj, part)
  if not callable(obj) or not getattr(obj, _MARK, False):
    raise ValueError(
      f"PBT task {spec.target!r} is not declared a task (decorate it with"
      " minmaxlab.pbt.named_task); refusing to call it"
    )
  made = obj(**spec.args)
  if hasattr(made, "init") and hasattr(made, "train"):
    return made.init, made.train
  if isinstance(made, tuple) and len(made) == 2 and all(callable(f) for f in made):
    return made
  raise ValueError(
    f"PBT task {spec.target!r} must return an object with init/train methods or a pair"
    f" (init_fn, train_fn), got {type(made).__name__}"
  )
