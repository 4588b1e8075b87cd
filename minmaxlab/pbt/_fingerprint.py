"""The configuration fingerprint of a black-box PBT campaign and the rerun check.

A campaign stores the JSON fingerprint of everything that changes what it
computes (space, task, population, trials, steps, selection, seed, ...); a
rerun on the same workdir with another configuration is refused, naming the
changed fields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from minmaxlab.pbt._space import Space
from minmaxlab.pbt._store import CONFIG, Store


class ConfigMismatch(ValueError):
  """The store in a workdir belongs to a campaign with another configuration."""


def space_json(space: Space) -> dict:
  """The JSON form of a search space (each dimension's type and fields)."""
  return {k: {"type": type(d).__name__, **d._asdict()} for k, d in sorted(space.items())}


def _differences(name: str, old: Any, new: Any) -> list[str]:
  """``"name old -> new"`` for ``old != new``, nested dictionaries field by field (dotted
  names, ``unset`` for a field only one side has), long values by name only."""
  if isinstance(old, Mapping) and isinstance(new, Mapping):
    out = []
    for k in sorted(set(old) | set(new)):
      out += _differences(f"{name}.{k}", old.get(k, _UNSET), new.get(k, _UNSET))
    return out
  a = "unset" if old is _UNSET else json.dumps(old, sort_keys=True)
  b = "unset" if new is _UNSET else json.dumps(new, sort_keys=True)
  if a == b:
    return []
  return [name if len(a) + len(b) > 80 else f"{name} {a} -> {b}"]


_UNSET = object()


def config_changes(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
  """``"field old -> new"`` for every field that differs, nested ones by their dotted name
  (``task.args.loss "bogus" -> "ns"``); top-level fields only one side has are not compared
  (a store written by an older version lacks some)."""
  out = []
  for k in sorted(set(stored) & set(current)):
    out += _differences(k, stored[k], current[k])
  return out


def check_fingerprint(store: Store, current: Mapping[str, Any], workdir: str | os.PathLike) -> None:
  """Raise :class:`ConfigMismatch` if ``store`` holds an initialized campaign
  whose stored fingerprint differs from ``current``."""
  stored = store.get(CONFIG)
  if stored is None or not store.get("initialized", False):
    return
  changed = config_changes(stored, json.loads(json.dumps(current)))
  if changed:
    raise ConfigMismatch(
      f"{workdir} holds a PBT campaign with another configuration ({'; '.join(changed)});"
      " rerun with the same configuration or use a new workdir"
    )
