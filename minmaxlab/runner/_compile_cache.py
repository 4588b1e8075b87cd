"""One in-process cache of an experiment's compiled programs, per config."""

from __future__ import annotations

import collections
import functools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any


def config_key(config: Any, loop_only: Iterable[str] = ()) -> Hashable:
  """A hashable key of ``config`` without the top-level fields in ``loop_only``.

  Nested mappings are keyed by their sorted items and sequences (lists and tuples
  alike) by their items; every value keeps its type (``1``, ``1.0`` and ``True``
  are different keys) and NaNs are equal.

  Args:
    config: an ``ml_collections.ConfigDict`` (anything with ``to_dict``) or a mapping.
    loop_only: top-level fields that do not change the compiled programs.
  """
  d = config.to_dict() if hasattr(config, "to_dict") else dict(config)
  skip = set(loop_only)
  return _freeze({k: v for k, v in d.items() if k not in skip})


def _freeze(v: Any) -> Hashable:
  if isinstance(v, Mapping):
    return ("map", tuple(sorted((str(k), _freeze(x)) for k, x in v.items())))
  if isinstance(v, (list, tuple)):
    return ("seq", tuple(_freeze(x) for x in v))
  if isinstance(v, float) and math.isnan(v):
    return ("float", "nan")
  try:
    hash(v)
  except TypeError:
    return (type(v).__name__, repr(v))
  return (type(v).__name__, v)


def _without(config: Any, loop_only: Iterable[str]) -> Any:
  """``config`` without the ``loop_only`` fields, of the same type (a copy)."""
  skip = set(loop_only)
  if hasattr(config, "to_dict"):
    return type(config)({k: v for k, v in config.to_dict().items() if k not in skip})
  return {k: v for k, v in dict(config).items() if k not in skip}


def program_cache(
  build: Callable[[Any], Any] | None = None,
  *,
  loop_only: Iterable[str] = (),
  maxsize: int | None = 2,
):
  """Cache ``build(config) -> programs`` (jitted functions, data) per config in a process.

  Runs whose configs differ only in ``loop_only`` fields (seed, step counts,
  logging periods) share one build, so a resumed or repeated run in the same
  process compiles nothing. ``build`` sees the config WITHOUT those fields, so
  the programs cannot depend on them. The key is :func:`config_key` (no JSON).

  Use as ``@program_cache(loop_only=(...))`` or ``program_cache(build)``; the
  result has ``cache_clear()``.

  Args:
    build: the function to cache.
    loop_only: top-level config fields that do not change the programs.
    maxsize: programs kept (least recently used dropped first); ``None``: all.
  """
  loop_only = tuple(loop_only)
  if build is None:
    return functools.partial(program_cache, loop_only=loop_only, maxsize=maxsize)
  cache: collections.OrderedDict = collections.OrderedDict()

  @functools.wraps(build)
  def cached(config):
    key = config_key(config, loop_only)
    if key in cache:
      cache.move_to_end(key)
      return cache[key]
    programs = build(_without(config, loop_only))
    cache[key] = programs
    if maxsize is not None and len(cache) > maxsize:
      cache.popitem(last=False)
    return programs

  cached.cache_clear = cache.clear
  return cached
