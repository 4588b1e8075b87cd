"""tests/_procs.py: the helpers that end the processes a test started, and wait for them."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import _procs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# a shell whose two children sleep: the whole group is three processes
GROUP = ["sh", "-c", "sleep 60 & sleep 60 & wait"]


def _members_once_started(proc, count, timeout=10.0):
  deadline = time.monotonic() + timeout
  while len(members := _procs.group_members(proc.pid)) < count:
    assert time.monotonic() < deadline, members
    time.sleep(0.02)
  return members


def test_kill_group_returns_once_every_member_has_ended():
  proc = _procs.start(GROUP)
  members = _members_once_started(proc, 3)
  assert proc.pid in members
  _procs.kill_group(proc)
  assert _procs.group_members(proc.pid) == []
  assert _procs.wait_gone(members, timeout=0) == []


def test_run_leaves_nothing_of_its_group():
  """A child that leaves a process running in its group: ``run`` returns with it gone."""
  out = _procs.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], timeout=30)
  left = int(out.stdout.split()[0])
  assert _procs.wait_gone([left], timeout=0) == []


def test_kill_and_wait_ends_a_stopped_process_and_wait_gone_reports_the_living():
  """A SIGSTOPped process (an MPI rank a test stopped) is killed and waited for; a live one
  is reported after the timeout."""
  stopped = subprocess.Popen(["sleep", "60"], start_new_session=True)
  alive = subprocess.Popen(["sleep", "60"], start_new_session=True)
  try:
    os.kill(stopped.pid, signal.SIGSTOP)
    assert _procs.kill_and_wait([stopped.pid]) == []  # a zombie until reaped: ended
    assert _procs.wait_gone([alive.pid], timeout=0.1) == [alive.pid]
  finally:
    for p in (stopped, alive):
      p.kill()
      p.wait()
  assert _procs.wait_gone([stopped.pid, alive.pid], timeout=0) == []
