"""Fault injection with hostile or bad inputs (issue 37 items 8 and 9).

A worker never imports code from the run's folder; every bad setting is refused before
anything is written, in one line naming the field, with the documented exit codes (2 for a
malformed command line, 1 for a bad value; see ``experiments/_cli.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

from minmaxlab import pbt
from tests import _procs

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if k != "MINMAXLAB_RERUN"}
  env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
  env.update(extra)
  return env


# --- item 8: no code from the workdir --------------------------------------------------------
def test_external_worker_started_in_the_workdir_never_imports_its_modules(tmp_path):
  from tests.test_reliability import _controller

  _controller(tmp_path).run(timeout=60)
  marker = tmp_path / "pwned"
  payload = f"open({str(marker)!r}, 'w').write('ran')\n"
  (tmp_path / "evilmod.py").write_text(payload + "def task():\n  return None\n")
  (tmp_path / "evilpkg").mkdir()
  (tmp_path / "evilpkg" / "__init__.py").write_text(payload)
  (tmp_path / "evilpkg" / "sub.py").write_text(payload)
  db = sqlite3.connect(tmp_path / "pbt.sqlite")
  for target in ("evilmod:task", "evilpkg.sub:task"):
    value = json.dumps(
      {"task": {"target": target, "args": {}}, "lease_s": 1, "poll_s": 0.01, "orphan_s": 5}
    )
    db.execute("UPDATE kv SET value=? WHERE key='task'", (value,))
    db.commit()
    for cwd, workdir in ((tmp_path, "."), (ROOT, str(tmp_path))):  # inside it, or named
      cmd = [sys.executable, "-m", "minmaxlab.pbt", "worker", "--workdir", workdir]
      env = _env(PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
      proc = _procs.run(cmd, timeout=120, cwd=cwd, env=env)
      assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
      assert proc.stderr.startswith("ERROR: PBT task ") and target.split(":")[0] in proc.stderr
      assert not marker.exists(), (target, cwd)
  db.close()


def test_resolve_task_outside_the_workdir_still_imports_installed_tasks(tmp_path):
  saved = list(sys.path)
  sys.path.append(str(tmp_path))
  try:
    spec = pbt.task_spec("tests.test_reliability:flaky_task", {})
    init_fn, train_fn = pbt.resolve_task(spec, tmp_path)
    assert callable(init_fn) and callable(train_fn)
    assert sys.path == [*saved, str(tmp_path)]  # left as it was
  finally:
    sys.path[:] = saved
