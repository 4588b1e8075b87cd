"""The generic study runner (``experiments/study.py``) on a tiny fake study in its own git
repository: a stopped study resumes to the same JSON (both stores), a dirty tree or an edited
protocol is refused in one line, bad ``--arms``/``--seeds`` are named in one line, arrays
are written beside their record, and ``report`` rewrites the study's blocks."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from experiments import _report, registration, study

PROTOCOL = {
  "study": "fake",
  "version": 1,
  "question": "does a beat b?",
  "arms": {"a": {"shift": 0.0}, "b": {"shift": 1.0}, "old": {"run": False}},
  "seeds": [0, 1, 2],
  "endpoint": "the value",
  "primary": {
    "metric": "value",
    "comparisons": [["a", "b"]],
    "test": "mann_whitney",
    "alternative": "two-sided",
    "alpha": 0.05,
  },
}


def _git(repo: Path, *args: str) -> None:
  env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
  env.update(GIT_COMMITTER_EMAIL="t@t", HOME=str(repo), PATH="/usr/bin:/bin:/usr/local/bin")
  done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
  assert done.returncode == 0, done.stderr


@pytest.fixture
def repo(tmp_path) -> Path:
  r = tmp_path / "repo"
  (r / "src").mkdir(parents=True)
  (r / "src" / "arm.py").write_text("X = 1\n")
  (r / "fake.v1.json").write_text(json.dumps(PROTOCOL))
  _git(r, "init", "-q")
  _git(r, "add", ".")
  _git(r, "commit", "-q", "-m", "fake v1")
  return r


def _fake(repo: Path, out: Path, calls: list, stop_after: int | None = None) -> study.Study:
  def run_one(ctx, arm, seed):
    if stop_after is not None and len(calls) == stop_after:
      raise KeyboardInterrupt  # the process is stopped
    calls.append((arm, seed))
    value = float(np.random.default_rng(seed).normal()) + ctx.protocol["arms"][arm]["shift"]
    return {"value": value}, {"x": np.full(3, value)}

  return study.Study(
    protocol=repo / "fake.v1.json",
    results=out,
    run_one=run_one,
    runs=str(repo.parent / "runs"),
    header=lambda ctx, runs: {"study": ctx.protocol["study"], "n": len(runs)},
    sort_key=lambda p, r: (r["seed"], list(p["arms"]).index(r["arm"])),
    repo=repo,
    sources=(":(glob)src/**/*.py",),
  )


def _files(out: Path) -> dict:
  if out.suffix == ".json":
    return {"one": out.read_text()}
  return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("store", ["folder", "file.json"])
def test_a_stopped_study_resumes_to_the_same_json(repo, tmp_path, store):
  whole, calls = tmp_path / "whole" / store, []
  study.main(_fake(repo, whole, calls), ["run"])
  assert calls == [(a, s) for s in (0, 1, 2) for a in ("a", "b")]  # seed-major, "old" not run
  stopped, again = tmp_path / "stopped" / store, []
  with pytest.raises(KeyboardInterrupt):
    study.main(_fake(repo, stopped, again, stop_after=3), ["run"])
  assert len(study.records(stopped)) == 3
  study.main(_fake(repo, stopped, again), ["run"])
  assert again == calls  # the three finished pairs were not run again
  assert _files(stopped) == _files(whole)
  stamps = {p: p.stat().st_mtime_ns for p in [stopped, *stopped.glob("*")]}
  study.main(_fake(repo, stopped, again), ["run"])  # every record there: nothing rewritten
  assert again == calls and stamps == {p: p.stat().st_mtime_ns for p in stamps}
  (rec,) = [r for r in study.records(whole) if (r["arm"], r["seed"]) == ("b", 2)]
  assert rec["value"] == pytest.approx(float(np.random.default_rng(2).normal()) + 1.0)
  if store == "folder":
    assert rec["registration"]["protocol"] == "fake.v1.json"
    with np.load(whole / "b_s2.npz") as f:
      assert f["x"].tolist() == [rec["value"]] * 3
  else:
    data = json.loads(whole.read_text())
    assert data["study"] == "fake" and data["registration"]["protocol"] == "fake.v1.json"
    assert data["n"] == 6


def _refused(fake: study.Study, argv=("run",)) -> str:
  with pytest.raises(SystemExit) as e:
    study.main(fake, list(argv))
  assert e.value.code and "\n" not in str(e.value.code), e.value.code
  return str(e.value.code)


def test_a_dirty_tree_or_an_edited_protocol_is_refused_in_one_line(repo, tmp_path):
  out, calls = tmp_path / "out", []
  (repo / "src" / "new.py").write_text("Y = 2\n")
  assert "source file src/new.py is not committed" in _refused(_fake(repo, out, calls))
  _git(repo, "add", "src/new.py")
  _git(repo, "commit", "-q", "-m", "new")
  (repo / "fake.v1.json").write_text(json.dumps({**PROTOCOL, "seeds": [0, 1]}))
  assert "protocol fake.v1.json is not committed as it is" in _refused(_fake(repo, out, calls), [])
  _git(repo, "commit", "-q", "-am", "edit")
  assert "was edited after its first commit" in _refused(_fake(repo, out, calls))
  assert calls == [] and not out.exists()
  study.main(_fake(repo, out, calls), ["run", "--trial", "--seeds", "1"])  # a smoke run
  assert calls == [("a", 1), ("b", 1)]
  assert json.loads((out / "a_s1.json").read_text())["registration"]["trial"] is True


def test_bad_arms_seeds_and_protocol_are_named_in_one_line(repo, tmp_path):
  fake = _fake(repo, tmp_path / "out", [])
  assert _refused(fake, ["run", "--arms", "a,zz"]).startswith("--arms zz: not an arm of")
  assert _refused(fake, ["run", "--seeds", "0,7"]).startswith("--seeds 7: not a seed of")
  assert _refused(fake, ["run", "--seeds", "x"]).startswith("--seeds x: not a seed of")
  missing = str(tmp_path / "nope.json")
  assert _refused(fake, ["run", "--protocol", missing]) == f"--protocol {missing}: no such file"
  assert registration.Refused.__mro__[1] is SystemExit


def test_arm_major_order_and_a_subset(repo, tmp_path):
  calls = []
  fake = _fake(repo, tmp_path / "out", calls)
  study.run(fake, study.parse(fake, ["run", "--arms", "b,a", "--seeds", "2,0"]), log=print)
  assert calls == [("b", 2), ("a", 2), ("b", 0), ("a", 0)]
  # the order read from the protocol, the results named by its version
  fake = dataclasses.replace(fake, order=lambda p: "arm", results=tmp_path / "v{version}")
  calls.clear()
  study.run(fake, study.parse(fake, ["run", "--seeds", "0,1"]), log=print)
  assert calls == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
  assert sorted(p.name for p in (tmp_path / "v1").glob("*.json"))[0] == "a_s0.json"
  p = {**PROTOCOL, "arms": {**PROTOCOL["arms"], "c": {"seeds": [1]}}}
  assert study.pairs(p, "arm") == [(a, s) for a in "ab" for s in (0, 1, 2)] + [("c", 1)]


def block_text() -> str:
  return "| arm | value |\n| a | 1.0 |"


def test_report_rewrites_the_studys_blocks(repo, tmp_path, monkeypatch):
  doc = tmp_path / "README.md"
  doc.write_text("x\n<!-- results:fake_block -->\nold\n<!-- /results:fake_block -->\n")
  monkeypatch.setitem(_report.BLOCKS, "fake_block", (str(doc), f"{__name__}:block_text"))
  fake = study.Study(repo / "fake.v1.json", tmp_path, lambda *a: {}, blocks=("fake_block",))
  lines = []
  assert study.report(fake, log=lines.append) == {"fake_block": block_text()}
  assert _report.read_block(doc, "fake_block") == block_text()
  assert lines == [f"{doc} [fake_block]: rewritten"]


def test_a_batch_study_runs_an_arms_seeds_at_once_and_resumes_unfinished_ones(repo, tmp_path):
  """``batch``: one call per arm with its missing seeds; a record saved as progress
  (``ctx.save``) and not ``done`` is run again."""
  calls, out = [], tmp_path / "out.json"

  def run_arm(ctx, arm, seeds):
    calls.append((arm, seeds))
    ctx.save([{"arm": arm, "seed": s, "steps": 1} for s in seeds])  # progress: at step 1
    if arm == "b" and len(calls) == 2:
      raise KeyboardInterrupt  # stopped after b's progress was saved
    return [{"seed": s, "steps": 2} for s in seeds]

  fake = dataclasses.replace(
    _fake(repo, out, []), run_one=run_arm, batch=True, done=lambda ctx, r: r["steps"] == 2
  )
  with pytest.raises(KeyboardInterrupt):
    study.main(fake, ["run", "--seeds", "0,2"])
  assert [(r["arm"], r["steps"]) for r in study.records(out)] == [("a", 2), ("b", 1)] * 2
  study.main(fake, ["run", "--seeds", "0,2"])
  assert calls == [("a", [0, 2]), ("b", [0, 2]), ("b", [0, 2])]
  assert {(r["arm"], r["seed"], r["steps"]) for r in study.records(out)} == {
    (a, s, 2) for a in "ab" for s in (0, 2)
  }


def test_two_tagged_sides_share_one_results_file(repo, tmp_path):
  """Each side (``tag``) runs and resumes its own pairs in the one file."""
  out, calls = tmp_path / "both.json", []
  ref = dataclasses.replace(_fake(repo, out, calls), tag={"system": "reference"})
  lib = dataclasses.replace(_fake(repo, out, calls), tag={"system": "library"})
  study.main(ref, ["run", "--seeds", "0"])
  study.main(lib, ["run", "--seeds", "0,1"])
  study.main(ref, ["run", "--seeds", "0,1"])
  assert calls == [("a", 0), ("b", 0)] + [("a", 0), ("b", 0), ("a", 1), ("b", 1)] + [
    ("a", 1),
    ("b", 1),
  ]
  got = sorted((r["system"], r["arm"], r["seed"]) for r in study.records(out))
  assert got == sorted((s, a, n) for s in ("library", "reference") for a in "ab" for n in (0, 1))
