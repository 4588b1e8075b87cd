"""A checkpoint folder's manifest: the id of the campaign that wrote it.

A new campaign's store gets a random id (``_store.CAMPAIGN``); the controller writes it into
the workdir's ``campaign.json`` and each worker copies it into the manifest of every trial
folder it writes, before the state. A store whose id differs from a manifest is refused, and
garbage collection deletes only folders whose manifest names the store's campaign
(``_gc``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST = "campaign.json"  # in the workdir and in each trial folder: {"campaign": id}


def read_manifest(folder: str | os.PathLike) -> str | None:
  """The campaign id a checkpoint folder (or the workdir) names in its manifest, or
  ``None`` (no manifest: written before campaign ids, or not a campaign's)."""
  try:
    value = json.loads((Path(folder) / MANIFEST).read_text()).get("campaign")
  except (OSError, ValueError, AttributeError):
    return None
  return value if isinstance(value, str) else None


def write_manifest(folder: str | os.PathLike, campaign: str, **extra: Any) -> None:
  """Write ``folder``'s manifest naming ``campaign`` (atomically)."""
  folder = Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  tmp = folder / f".tmp-{MANIFEST}-{os.getpid()}"
  tmp.write_text(json.dumps({"campaign": campaign, **extra}))
  os.replace(tmp, folder / MANIFEST)
