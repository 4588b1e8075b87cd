"""Registration enforced by the study tool (``experiments.registration``, issue 46): a study
starts only when its protocol and every source file are committed and unchanged, and the
protocol is what its first commit added; each refusal is one line and a non-zero exit. The
repositories are made with ``git init`` in ``tmp_path``, so nothing depends on this checkout's
state; the last tests read this checkout's history (every committed protocol's git time)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from experiments import _report, registration

REPO = Path(_report.REPO)


def _git(repo: Path, *args: str) -> str:
  env = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
    "HOME": str(repo),
    "PATH": "/usr/bin:/bin:/usr/local/bin",
  }
  done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
  assert done.returncode == 0, done.stderr
  return done.stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
  """A committed study: a library module, a study module and its protocol."""
  r = tmp_path / "repo"
  for rel, text in {
    "minmaxlab/__init__.py": "X = 1\n",
    "experiments/study.py": "from minmaxlab import X\n",
    "experiments/protocols/study.v1.json": json.dumps({"study": "s", "registered": "x"}),
    "README.md": "notes\n",
  }.items():
    (r / rel).parent.mkdir(parents=True, exist_ok=True)
    (r / rel).write_text(text)
  _git(r, "init", "-q")
  _git(r, "add", ".")
  _git(r, "commit", "-q", "-m", "study v1")
  return r


def _refused(repo: Path, protocol: str = "experiments/protocols/study.v1.json") -> str:
  with pytest.raises(SystemExit) as e:
    registration.start(repo / protocol, repo=repo)
  assert isinstance(e.value, registration.Refused) and e.value.code  # non-zero exit
  text = str(e.value)
  assert text.startswith("registration: ") and "\n" not in text, text
  return text


def test_a_committed_study_starts_and_records_blob_commit_and_git_time(repo):
  protocol = repo / "experiments/protocols/study.v1.json"
  (repo / "README.md").write_text("edited notes\n")  # not a source file: no matter
  (repo / "runs").mkdir()
  (repo / "runs" / "x.json").write_text("{}")  # results of a run: not a source file
  record = registration.start(protocol, repo=repo)
  head = _git(repo, "rev-parse", "HEAD")
  assert record == {
    "protocol": "experiments/protocols/study.v1.json",
    "protocol_blob": _git(repo, "hash-object", str(protocol)),
    "registered": "2026-01-02T03:04:05+00:00",
    "registered_commit": head,
    "commits": [head],
  }
  assert "protocol blob" in registration.describe(record) and head[:7] in registration.describe(
    record
  )


def test_a_dirty_protocol_is_refused(repo):
  (repo / "experiments/protocols/study.v1.json").write_text('{"study": "s", "seeds": [9]}')
  assert "protocol experiments/protocols/study.v1.json is not committed" in _refused(repo)


def test_an_uncommitted_protocol_is_refused(repo):
  (repo / "experiments/protocols/study.v2.json").write_text("{}")
  text = _refused(repo, "experiments/protocols/study.v2.json")
  assert "study.v2.json is not committed" in text


def test_a_dirty_study_module_is_refused(repo):
  (repo / "experiments/study.py").write_text("from minmaxlab import X as Y\n")
  assert "source file experiments/study.py is not committed" in _refused(repo)


def test_a_dirty_library_module_or_a_new_untracked_one_is_refused(repo):
  (repo / "minmaxlab/new.py").write_text("Z = 2\n")
  assert "source file minmaxlab/new.py" in _refused(repo)
  _git(repo, "add", "minmaxlab/new.py")  # staged, not committed: still refused
  assert "source file minmaxlab/new.py" in _refused(repo)


def test_an_edited_committed_protocol_is_refused(repo):
  protocol = repo / "experiments/protocols/study.v1.json"
  first = _git(repo, "rev-parse", "HEAD")
  protocol.write_text(json.dumps({"study": "s", "registered": "y"}))
  _git(repo, "commit", "-q", "-am", "edit the protocol")
  text = _refused(repo)
  assert f"edited after its first commit {first[:7]}" in text and "new version file" in text
  # the same content as a new version file is a new registration
  (repo / "experiments/protocols/study.v2.json").write_text(protocol.read_text())
  _git(repo, "add", ".")
  _git(repo, "commit", "-q", "-m", "study v2")
  record = registration.start(repo / "experiments/protocols/study.v2.json", repo=repo)
  assert record["registered_commit"] == _git(repo, "rev-parse", "HEAD")


def test_a_protocol_outside_the_repository_is_refused_unless_a_trial(repo, tmp_path):
  outside = tmp_path / "p.json"
  outside.write_text("{}")
  with pytest.raises(registration.Refused, match="not in the study's repository"):
    registration.start(outside, repo=repo)
  record = registration.start(outside, repo=repo, trial=True)
  assert record["trial"] is True and record["commits"] == [_git(repo, "rev-parse", "HEAD")]
  assert "trial run" in registration.describe(record)


def test_merge_keeps_every_commit_and_refuses_another_protocol():
  a = {"protocol_blob": "b1", "commits": ["c1"]}
  assert registration.merge(None, a) == a
  assert registration.merge(a, dict(a, commits=["c2"]))["commits"] == ["c1", "c2"]
  assert registration.merge(a, dict(a))["commits"] == ["c1"]
  with pytest.raises(registration.Refused, match="new results file"):
    registration.merge(a, {"protocol_blob": "b2", "commits": ["c2"]})


@pytest.mark.parametrize(
  "entry",
  [
    ("experiments.gan.results", ["run", "--protocol", "{p}"]),
    ("experiments.gan.dynamics_study", ["run", "--protocol", "{p}"]),
    ("experiments.coevolution.lipizzaner_grids", ["run", "--protocol", "{p}"]),
    ("experiments.pbt.pbt_vs_rs_v1", ["run", "--protocol", "{p}"]),
  ],
)
def test_every_study_command_refuses_an_unregistered_protocol(entry, tmp_path):
  """Each study command checks the registration before its first run (here: a copy of a
  committed protocol outside the repository is refused at once, in one line)."""
  import importlib

  module, argv = entry
  src = sorted(REPO.glob("experiments/*/protocols/*.json"))[0]
  copy = tmp_path / src.name
  copy.write_text(src.read_text())
  main = importlib.import_module(module).main
  with pytest.raises(registration.Refused) as e:
    main([a.format(p=copy) for a in argv] + ["--runs", str(tmp_path / "runs")])
  assert "not in the study's repository" in str(e.value) and "\n" not in str(e.value)
  assert not (tmp_path / "runs").exists()


def test_the_ring_study_refuses_an_unregistered_protocol(tmp_path):
  from experiments.coevolution import ring_study

  copy = tmp_path / "ring.v1.json"
  copy.write_text(ring_study.STUDY.protocol.read_text())
  with pytest.raises(registration.Refused, match="not in the study's repository"):
    ring_study.main(["run", "--protocol", str(copy), "--out", str(tmp_path / "ring.json")])
  assert not (tmp_path / "ring.json").exists()


def test_typed_registration_times_are_compared_to_the_minute():
  assert registration.typed_agrees("2026-12-04T17:20Z", "2026-12-04T17:20:59+00:00")
  assert registration.typed_agrees("2026-12-04T18:20Z", "2026-12-04T17:20:00-01:00")
  assert not registration.typed_agrees("2026-12-04T17:30Z", "2026-12-04T17:27:35+00:00")
  assert not registration.typed_agrees(None, "2026-12-04T17:27:35+00:00")


def test_every_committed_protocol_has_its_git_registration_time():
  """Each committed protocol's registration time is its first commit's, read from git; a
  typed ``registered`` field that names another minute is marked as disagreeing."""
  protocols = sorted(REPO.glob("experiments/*/protocols/*.json"))
  tracked = set(registration.git(REPO, "ls-files", "experiments").splitlines())
  committed = [p for p in protocols if p.relative_to(REPO).as_posix() in tracked]
  assert len(committed) >= 10
  for path in committed:
    first = registration.history(path)  # git, or in a shallow clone the committed record
    typed = json.loads(path.read_text()).get("registered")
    text = registration.registered(path, typed)
    assert text.startswith(first["time"][:10]) and first["commit"][:7] in text, (path, text)
    # a protocol without a typed field (the registration tool needs none) disagrees with nothing
    wrong = typed is not None and not registration.typed_agrees(typed, first["time"])
    assert ("disagrees" in text) == wrong, text
    print(f"{path.relative_to(REPO)}: {text}")
  pbt = REPO / "experiments/pbt/protocols/pbt_vs_rs.v1.json"  # typed 17:30, committed 17:27:35
  assert "typed `registered` 2026-12-04T17:30Z disagrees" in registration.registered(
    pbt, json.loads(pbt.read_text())["registered"]
  )


def test_a_shallow_clone_has_no_registration_times(repo, tmp_path):
  (repo / "README.md").write_text("two\n")
  _git(repo, "commit", "-q", "-am", "second")
  shallow = tmp_path / "shallow"
  _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
  with pytest.raises(registration.Refused, match="shallow clone"):
    registration.first_commit(shallow / "experiments/protocols/study.v1.json", shallow)


def test_the_committed_record_equals_what_git_says():
  """experiments/registrations.json (what reports read in a shallow clone) equals git's own
  answers for every committed protocol: first commit, time, blob and the later edits."""
  if registration.git(registration.REPO, "rev-parse", "--is-shallow-repository") == "true":
    pytest.skip("a shallow clone: the history the record is checked against is not here")
  recorded = json.loads(registration.RECORD.read_text())
  assert recorded == registration.record(), (
    "run: python -m experiments.registration record (after committing a protocol)"
  )


def test_a_shallow_clone_reads_the_record(repo, tmp_path):
  """In a shallow clone the registration time comes from the committed record; a protocol
  missing from it is one clear error."""
  proto = repo / "experiments" / "protocols" / "study.v1.json"
  (repo / "experiments" / "registrations.json").write_text(
    json.dumps(registration.record(repo)) + "\n"
  )
  _git(repo, "add", ".")
  _git(repo, "commit", "-q", "-m", "record")
  full = registration.registered(proto, repo=repo)
  shallow = tmp_path / "shallow"
  _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
  assert _git(shallow, "rev-parse", "--is-shallow-repository") == "true"
  assert registration.registered(shallow / proto.relative_to(repo), repo=shallow) == full
  other = shallow / "experiments" / "protocols" / "study.v2.json"
  other.write_text("{}\n")
  with pytest.raises(ValueError, match="not in registrations.json"):
    registration.history(other, shallow)
