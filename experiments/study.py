"""One runner for every pre-registered study: a study is its protocol plus its arms.

A :class:`Study` names its protocol file, where its results go, the function that runs one
(arm, seed) of the protocol and returns its JSON-able record, and the blocks its report
generates. The runner owns the rest:

- ``run``: the registered start (``registration.start``: a committed, unchanged protocol and
  committed code; ``--trial`` skips it for a smoke run), the loop over the protocol's
  (arm, seed) pairs, seed-major or arm-major; a pair whose record is written is skipped, so a
  stopped study resumes where it stopped, and each record is written atomically (a temporary
  file renamed over it) as soon as it exists;
- ``report``: the study's generated blocks rewritten from the committed JSON
  (``experiments._report``: the same functions its test regenerates);
- the command line, ``python -m <the study's module> run|report`` with ``--protocol``,
  ``--arms``, ``--seeds``, ``--trial``, ``--runs``, ``--out`` and the study's own options; a
  bad value ends it with one line naming the value and a non-zero exit.

Two stores. ``results`` a folder: one ``<arm>_s<seed>.json`` per record, each with the
registration record. ``results`` a ``.json`` file: one object, the study's ``header`` fields,
the registration record (merged over every process that wrote it: ``registration.merge``) and
every record in ``runs`` (kept in ``sort_key`` order); several processes may share it, and
several studies too, each with its own ``tag`` (``{"system": "reference"}`` and
``{"system": "library"}``: the two sides of an outcome-parity study). A rerun that finds every
record written rewrites nothing.

A ``batch`` study runs an arm's missing seeds in one call (vmapped) and may save their
progress as it goes (``Context.save``); a record that is not ``done`` is run again.

An arm of the protocol with ``"run": false`` is not run (another version's runs are reused);
an arm with its own ``"seeds"`` runs only those.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from experiments import _report, registration

Order = Literal["seed", "arm"]


class Context(NamedTuple):
  """What an arm's function reads besides its seed."""

  protocol: dict
  protocol_path: Path
  runs: Path  # the study's work folders (checkpoints, caches)
  options: argparse.Namespace  # the whole command line, the study's own options included
  log: Callable[[str], None]
  save: Callable[[list], None]  # write records (with arm and seed) now: an arm's progress


@dataclass(frozen=True)
class Study:
  """A pre-registered study: its protocol, its arms, its results and its blocks."""

  protocol: Path  # the default protocol file
  results: Path  # a folder (one JSON per record) or one ``.json`` file ({version} filled)
  run_one: Callable[[Context, str, Any], Any]  # (arm, seed) -> record or (record, arrays)
  batch: bool = False  # run_one(ctx, arm, seeds) -> records: an arm's seeds at once
  done: Callable[[Context, dict], bool] | None = None  # a finished record (default: every)
  arm_key: str = "arm"  # the records' field that names their arm
  tag: Mapping[str, Any] = field(default_factory=dict)  # fields of its every record (a side)
  runs: str = "runs/study"  # the default parent of the work folders ({version} filled)
  blocks: tuple[str, ...] = ()  # its generated blocks (registered with ``_report``)
  order: Order | Callable[[dict], Order] = "seed"  # seed-major or arm-major (of a protocol)
  header: Callable[[Context, list], dict] | None = None  # one file: fields beside its runs
  sort_key: Callable[[dict, dict], Any] | None = None  # (protocol, record) -> its order
  saved: Callable[[Context, Path], None] | None = None  # after every write (a figure)
  options: Callable[[argparse.ArgumentParser], None] | None = None  # the study's own
  check: Callable[[argparse.Namespace], str | None] | None = None  # a bad option's line
  commands: tuple[tuple[str, Callable[[argparse.Namespace], Any]], ...] = ()  # its own
  repo: Path = registration.REPO  # where the protocol and the code must be committed
  sources: tuple[str, ...] = registration.SOURCES


def pairs(protocol: dict, order: str = "seed", arms=None, seeds=None) -> list[tuple[str, int]]:
  """The (arm, seed) pairs the study runs, among ``arms`` and ``seeds`` (default: all)."""
  spec = protocol["arms"]
  arms = [a for a in (arms or spec) if spec[a].get("run", True)]
  seeds = list(protocol["seeds"] if seeds is None else seeds)
  own = {a: spec[a].get("seeds", protocol["seeds"]) for a in arms}
  if order == "arm":
    return [(a, s) for a in arms for s in seeds if s in own[a]]
  return [(a, s) for s in seeds for a in arms if s in own[a]]


def _write(path: Path, data=None, arrays: dict | None = None) -> None:
  """``data`` as JSON (``minmaxlab.runner.write_json``) or ``arrays`` as a compressed
  ``.npz`` at ``path``, atomically."""
  from minmaxlab.runner import write_json

  path.parent.mkdir(parents=True, exist_ok=True)
  if arrays is None:
    write_json(path, data, indent=1)
    return
  import numpy as np

  tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  with open(tmp, "wb") as f:
    np.savez_compressed(f, **arrays)
  tmp.replace(path)


def records(results) -> list[dict]:
  """Every record in ``results`` (a folder of JSON files, or one JSON file's ``runs``)."""
  results = Path(results)
  if results.suffix == ".json":
    return json.loads(results.read_text())["runs"] if results.exists() else []
  return [json.loads(p.read_text()) for p in sorted(results.glob("*_s*.json"))]


def _save(study: Study, ctx: Context, out: Path, reg: dict, recs: list) -> None:
  """Add the records ``recs`` to the one-file store ``out`` with ``reg`` merged in."""
  with _report.results_lock(out):
    data = json.loads(out.read_text()) if out.exists() else {"runs": []}
    keys = {_key(study, r) for r in recs}
    data["runs"] = [r for r in data["runs"] if _key(study, r) not in keys] + recs
    if study.sort_key:
      data["runs"].sort(key=lambda r: study.sort_key(ctx.protocol, r))
    data.update(study.header(ctx, data["runs"]) if study.header else {})
    data["registration"] = registration.merge(data.get("registration"), reg)
    _write(out, data)


def run(study: Study, options: argparse.Namespace | None = None, log=print) -> list[dict]:
  """Run (or resume) ``study`` from its command line ``options`` (:func:`parse`; default
  its defaults): every registered pair without a finished record; return every record."""
  o = options or parse(study, ["run"])
  ctx, arms, seeds = context(study, o, log)
  reg = registration.start(o.protocol, trial=o.trial, repo=study.repo, sources=study.sources)
  out, _ = where(study, o, ctx.protocol)
  one_file = out.suffix == ".json"
  ctx = ctx._replace(save=lambda recs: _save(study, ctx, out, reg, [dict(r) for r in recs]))
  done = study.done or (lambda ctx, r: True)
  have = {_key(study, r) for r in records(out) if done(ctx, r)} if one_file else set()
  order = study.order(ctx.protocol) if callable(study.order) else study.order
  todo: dict = {}
  for arm, seed in pairs(ctx.protocol, "arm" if study.batch else order, arms, seeds):
    if (*study.tag.values(), arm, seed) in have or (out / f"{arm}_s{seed}.json").is_file():
      log(f"{arm} seed {seed}: done before, kept")
    elif study.batch:
      todo.setdefault((arm, None), []).append(seed)
    else:
      todo[(arm, seed)] = [seed]
  for (arm, seed), seeds in todo.items():
    log(f"{time.strftime('%H:%M:%S')} {arm} seeds {seeds}: start")
    made = study.run_one(ctx, arm, seeds) if study.batch else [study.run_one(ctx, arm, seed)]
    for rec, arrays in map(_record, made):
      rec.update({**study.tag, study.arm_key: arm, "seed": rec["seed"] if study.batch else seed})
      if one_file:
        ctx.save([rec])
      else:
        if arrays is not None:  # first: a record on disk means its arrays are there
          _write(out / f"{arm}_s{rec['seed']}.npz", arrays=arrays)
        _write(out / f"{arm}_s{rec['seed']}.json", {**rec, "registration": reg})
    if study.saved:
      study.saved(ctx, out)
    log(f"{time.strftime('%H:%M:%S')} {arm} seeds {seeds}: written to {out}")
  return records(out)  # a study with every record written before: no file rewritten


def _key(study: Study, record: dict) -> tuple:
  return *(record.get(k) for k in study.tag), record[study.arm_key], record["seed"]


def context(study: Study, o, log=print) -> tuple[Context, list | None, list | None]:
  """The context of the command line ``o`` (its protocol read and checked, ``save`` not
  set), and its ``--arms`` and ``--seeds`` (``None``: all)."""
  if not Path(o.protocol).is_file():
    raise SystemExit(f"--protocol {o.protocol}: no such file")
  protocol = _report.load_protocol(o.protocol)
  arms, seeds = _selection(protocol, o)
  _, runs = where(study, o, protocol)
  return Context(protocol, Path(o.protocol), runs, o, log, lambda recs: None), arms, seeds


def where(study: Study, o, protocol: dict) -> tuple[Path, Path]:
  """The results and the work folders of the command line ``o`` (``--out``, ``--runs``;
  by default the study's, with the protocol's ``{version}`` filled in; an ``--out`` folder of a
  one-file study: its results file's name in that folder)."""
  fill = lambda p: Path(str(p).format(version=protocol["version"]))  # noqa: E731
  out, one_file = fill(o.out or study.results), Path(study.results).suffix == ".json"
  if one_file and out.suffix != ".json":  # a folder: the study's results file in it
    out = out / Path(study.results).name
  return out, fill(o.runs or study.runs)


def _record(made) -> tuple[dict, dict | None]:
  return (dict(made[0]), made[1]) if isinstance(made, tuple) else (dict(made), None)


def _selection(protocol: dict, o) -> tuple[list | None, list | None]:
  """The ``--arms`` and ``--seeds`` of ``o``, checked against the protocol (one line)."""
  arms = o.arms.split(",") if o.arms else None
  for a in arms or ():
    if a not in protocol["arms"]:
      raise SystemExit(f"--arms {a}: not an arm of {o.protocol} ({', '.join(protocol['arms'])})")
  seeds = None
  if o.seeds:
    seeds = []
    for s in o.seeds.split(","):
      if not s.strip().lstrip("-").isdigit() or int(s) not in protocol["seeds"]:
        raise SystemExit(f"--seeds {s}: not a seed of {o.protocol} {protocol['seeds']}")
      seeds.append(int(s))
  return arms, seeds


def report(study: Study, log=print) -> dict[str, str]:
  """Rewrite the study's blocks from the committed JSON; block name -> its text."""
  import importlib

  for module in _report.STUDY_MODULES if set(study.blocks) - set(_report.BLOCKS) else ():
    importlib.import_module(module)  # the modules that register blocks
  out = {}
  for name in study.blocks:
    doc, _ = _report.BLOCKS[name]
    out[name] = _report.make(name)
    changed = _report.write_block(_report.REPO / doc, name, out[name])
    log(f"{doc} [{name}]: {'rewritten' if changed else 'unchanged'}")
  return out


def parse(study: Study, argv) -> argparse.Namespace:
  """The command line of ``study``; a bad option ends it with one line (a non-zero exit)."""
  ap = argparse.ArgumentParser(description=f"run or report the study of {study.protocol.name}")
  commands = ("run", "report", *(c for c, _ in study.commands))
  ap.add_argument("command", nargs="?", default="run", choices=commands, help="default: run")
  ap.add_argument("--protocol", default=str(study.protocol))
  ap.add_argument("--arms", help="comma-separated subset of the protocol's arms")
  ap.add_argument("--seeds", help="comma-separated subset of the protocol's seeds")
  ap.add_argument("--trial", action="store_true", help="a smoke run: registration not checked")
  ap.add_argument("--runs", help=f"the work folders' parent (default {study.runs})")
  ap.add_argument("--out", help=f"the results folder or JSON file (default {study.results})")
  if study.options:
    study.options(ap)
  o = ap.parse_args(argv)
  bad = study.check(o) if study.check and o.command != "report" else None
  if bad:
    raise SystemExit(bad)
  return o


def main(study: Study, argv=None) -> int:
  """``run``, ``report`` or one of the study's own commands, as the command line says."""
  o = parse(study, argv)
  if o.command == "report":
    report(study)
    return 0
  if o.command != "run":
    dict(study.commands)[o.command](o)
    return 0
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  run(study, o, log=lambda s: print(s, flush=True))
  return 0
