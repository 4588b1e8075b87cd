"""A cache key for the compiled programs of an experiment config."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def program_key(config: Any, loop_only: Iterable[str] = ()) -> str:
  """JSON of ``config`` without the fields in ``loop_only``: a key that lasts across processes.

  The key of an experiment's compiled programs stored on disk (:func:`stored_program`),
  so runs that differ only in loop settings (seed, step counts, logging periods) load
  one compilation. (In a process, :func:`program_cache` keys by the values themselves.)

  Args:
    config: an ``ml_collections.ConfigDict`` (or anything with ``to_dict``) or a dict.
    loop_only: top-level fields that do not change the compiled programs.
  """
  d = config.to_dict() if hasattr(config, "to_dict") else dict(config)
  skip = set(loop_only)
  return json.dumps({k: v for k, v in d.items() if k not in skip}, sort_keys=True)
