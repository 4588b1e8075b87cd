"""Registration enforced by the study tool: a pre-registered study starts only from committed code.

Every study command that runs a protocol (``python -m <study> run`` of every study on the
study runner, ``experiments.study``, and ``experiments.parity.lipizzaner_ring_outcome run``)
calls :func:`start` before its first run. It refuses, in one line with a non-zero exit, unless

1. the protocol file is committed and unchanged (``git status`` is clean for it);
2. every source file the study can import is committed and unchanged: a clean ``git status``
   for the Python files under ``minmaxlab/`` and ``experiments/`` (:data:`SOURCES`; untracked
   ones included), which holds the study module and every project module it imports;
3. the protocol is what was first committed: its blob now equals its blob in the commit that
   added it. A changed protocol is a new version file (``<study>.v<N+1>.json``), never an edit.

The registration time is the protocol's first commit time read from git (:func:`first_commit`),
not a field typed into the file. :func:`start` returns the record every result JSON keeps
(``"registration"``): the protocol's path and git blob, its first commit and time, and the
commit the study ran at (:func:`merge` keeps every commit when several processes or resumed
runs write one JSON). ``trial=True`` (the commands' ``--trial``) skips the checks for a smoke
run on a protocol outside the repository (the tests); its record says ``"trial": true`` and
no report takes it for a registered result.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the source files of every study: the study modules and every project module they import
SOURCES = (":(glob)minmaxlab/**/*.py", ":(glob)experiments/**/*.py")


class Refused(SystemExit):
  """A study that may not start: its one-line reason (exit status 1)."""


def git(repo, *args: str, strip: bool = True) -> str:
  """The stdout of ``git -C repo ARGS`` (stripped, or only of its final newline);
  :class:`Refused` when git fails."""
  try:
    done = subprocess.run(
      ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
  except OSError as e:
    raise Refused(f"registration: git is not available ({e})") from None
  if done.returncode != 0:
    first = (done.stderr.strip().splitlines() or ["failed"])[0]
    raise Refused(f"registration: git {' '.join(args[:2])} failed in {repo}: {first}")
  return done.stdout.strip() if strip else done.stdout.rstrip("\n")


def first_commit(path, repo=REPO) -> dict | None:
  """The commit that added ``path`` (a file of ``repo``): ``{"commit", "time", "blob"}``
  (the committer time in ISO 8601, as git prints ``%cI``, and the file's blob in that
  commit), or ``None`` when no commit added it."""
  path, repo = Path(path).resolve(), Path(repo).resolve()
  rel = path.relative_to(repo).as_posix()
  if git(repo, "rev-parse", "--is-shallow-repository") == "true":
    raise Refused(f"registration: {repo} is a shallow clone; its first commits are not there")
  lines = git(repo, "log", "--diff-filter=A", "--format=%H %cI", "--", rel).splitlines()
  if not lines:
    return None
  commit, time = lines[-1].split()  # the oldest commit that added it
  return {"commit": commit, "time": time, "blob": git(repo, "rev-parse", f"{commit}:{rel}")}


def dirty(paths, repo) -> list[str]:
  """The files among ``paths`` (git pathspecs) that ``git status`` lists in ``repo``:
  modified, staged, deleted or untracked, as ``"XY path"`` lines."""
  out = git(repo, "status", "--porcelain", "--untracked-files=all", "--", *paths, strip=False)
  return [ln for ln in out.splitlines() if ln.strip()]


def start(protocol_path, *, trial: bool = False, repo=REPO, sources=SOURCES) -> dict:
  """Check that the study of ``protocol_path`` may start (see the module docstring) and
  return its registration record; :class:`Refused` (one line) when it may not. ``repo``:
  the repository of the study's code (this one), which must hold the protocol too."""
  path, repo = Path(protocol_path).resolve(), Path(repo).resolve()
  if trial:
    try:
      commit = git(repo, "rev-parse", "HEAD")
    except Refused:
      commit = None
    return {"trial": True, "protocol": str(protocol_path), "commits": [commit] if commit else []}
  if not path.is_file():
    raise Refused(f"registration: protocol {protocol_path} does not exist")
  if not path.is_relative_to(repo):
    raise Refused(f"registration: protocol {protocol_path} is not in the study's repository {repo}")
  rel = path.relative_to(repo).as_posix()
  changed = dirty([rel], repo)
  if changed:
    raise Refused(
      f"registration: protocol {rel} is not committed as it is ({changed[0][:2].strip()}); "
      "commit it before its study starts"
    )
  changed = dirty(sources, repo)
  if changed:
    more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
    raise Refused(
      f"registration: source file {changed[0][3:]} is not committed as it is{more}; "
      "a study runs only committed code"
    )
  first = first_commit(path, repo)
  if first is None:
    raise Refused(f"registration: no commit of {repo} added protocol {rel}")
  blob = git(repo, "rev-parse", f"HEAD:{rel}")
  if first["blob"] != blob:
    raise Refused(
      f"registration: protocol {rel} was edited after its first commit {first['commit'][:7]} "
      f"({first['time']}); a changed protocol is a new version file, not an edit"
    )
  return {
    "protocol": rel,
    "protocol_blob": blob,
    "registered": first["time"],
    "registered_commit": first["commit"],
    "commits": [git(repo, "rev-parse", "HEAD")],
  }


def merge(old: dict | None, new: dict) -> dict:
  """The registration record of a result JSON that ``new`` (this process) adds runs to:
  ``old``'s commits kept beside ``new``'s; :class:`Refused` when the two name different
  protocol blobs (runs of two protocols never share one JSON)."""
  if not old:
    return new
  if old.get("protocol_blob") != new.get("protocol_blob") or old.get("trial") != new.get("trial"):
    raise Refused(
      f"registration: the results hold runs of protocol blob {old.get('protocol_blob')}, "
      f"not {new.get('protocol_blob')}; write them to a new results file"
    )
  commits = list(old.get("commits", []))
  commits += [c for c in new.get("commits", []) if c not in commits]
  return {**new, "commits": commits}


def describe(record: dict | None) -> str:
  """One sentence for a report: what a result JSON's registration record says."""
  if not record:
    return (
      "Registration record: none (these runs predate the registration the study tool enforces)."
    )
  if record.get("trial"):
    return "Registration record: a trial run (`--trial`), not a registered result."
  commits = ", ".join(f"`{c[:7]}`" for c in record.get("commits", []))
  return (
    f"Registration record: protocol blob `{record['protocol_blob'][:12]}`, registered "
    f"{record['registered']} (its first commit `{record['registered_commit'][:7]}`), "
    f"run at {commits}."
  )


def typed_agrees(typed: str | None, time: str) -> bool:
  """Whether a protocol's typed ``registered`` field (e.g. ``2026-12-04T17:20Z``, to the
  minute, UTC) names the minute of its git first-commit time ``time`` (``%cI``)."""
  from datetime import datetime

  if not typed:
    return False
  try:
    a = datetime.fromisoformat(typed.replace("Z", "+00:00")).astimezone(UTC)
  except ValueError:
    return False
  b = datetime.fromisoformat(time).astimezone(UTC)
  return a.replace(second=0, microsecond=0) == b.replace(second=0, microsecond=0)


RECORD = REPO / "experiments" / "registrations.json"  # git's answers, for a shallow clone


def history(protocol_path, repo=REPO) -> dict:
  """What git says of a committed protocol: its first commit (``commit``, ``time``,
  ``blob``) and the commits that edited it after (``later``, newest first).
  In a shallow clone, where those commits are missing, the answers recorded in
  :data:`RECORD` (``python -m experiments.registration record``; a test checks the record
  against git wherever the history is there). ``ValueError`` for a protocol no commit added."""
  path, repo = Path(protocol_path).resolve(), Path(repo).resolve()
  rel = path.relative_to(repo).as_posix()
  if git(repo, "rev-parse", "--is-shallow-repository") == "true":
    recorded = json.loads((repo / RECORD.relative_to(REPO)).read_text()).get(rel)
    if recorded is None:
      raise ValueError(f"protocol {rel} is not in {RECORD.name}: run it in a full clone")
    return recorded
  first = first_commit(path, repo)
  if first is None:
    raise ValueError(f"protocol {protocol_path} is not committed: it has no registration time")
  later = git(repo, "log", "--format=%H", f"{first['commit']}..HEAD", "--", rel).split()
  return {**first, "later": later}


def record(repo=REPO) -> dict:
  """:func:`history` of every committed protocol (``experiments/**/protocols/*.json``)."""
  repo = Path(repo).resolve()
  files = git(repo, "ls-files", "--", ":(glob)experiments/**/protocols/*.json").split()
  return {rel: history(repo / rel, repo) for rel in sorted(files)}


def registered(protocol_path, typed: str | None = None, repo=REPO) -> str:
  """The registration time of a protocol as a report shows it: its git first-commit time
  (UTC), and, where the file's typed ``registered`` field names another minute, that field
  marked as disagreeing. ``ValueError`` for a protocol no commit added."""
  from datetime import datetime

  first = history(protocol_path, repo)
  utc = datetime.fromisoformat(first["time"]).astimezone(UTC)
  text = f"{utc:%Y-%m-%d %H:%M:%S} UTC (first commit `{first['commit'][:7]}`)"
  if first["later"]:
    text += f"; the file was edited after it, in {', '.join(f'`{c[:7]}`' for c in first['later'])}"
  if typed is not None and not typed_agrees(typed, first["time"]):
    text += f"; the file's typed `registered` {typed} disagrees"
  return text


if __name__ == "__main__":  # python -m experiments.registration record
  import sys

  if sys.argv[1:] != ["record"]:
    sys.exit("usage: python -m experiments.registration record")
  RECORD.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
  print(f"wrote {RECORD.relative_to(REPO)}")
