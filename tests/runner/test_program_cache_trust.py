"""Issue 50 item 6: a program cache the library can trust. The folders are created 0700 and
the files 0600 whatever the umask; programs are loaded only from a folder and files of this
user's that no one else can write (as ssh treats its keys), else compiled with one line;
any fault in the cache (a folder that cannot be made, a read-only folder holding a stale
program, a FIFO or a link in place of a file) costs one line and a compile, never a crash or
a hang."""

from __future__ import annotations

import functools
import io
import os
import signal
import stat
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab import runner
from minmaxlab.runner import _private_files, _stored_programs


def _step(x, y):
  return jnp.tanh(x @ y) + 1.0, jnp.sum(x)


ARGS = (jnp.arange(12.0).reshape(3, 4) / 12.0, jnp.ones((4, 2)))
# every test here runs under the library's cache threshold (tests/runner/conftest.py)
pytestmark = pytest.mark.usefixtures("library_cache_threshold")


@functools.cache
def _want():
  """The probe's outputs through a plain jit (computed in a test: not at import, where the
  session's cache would keep the probe)."""
  return jax.jit(_step)(*ARGS)


def _program(folder, stream):
  return runner.stored_program(jax.jit(_step), "trust", "cfg", directory=folder, stream=stream)


def _run(folder):
  """(the program after its first call, the lines it wrote); the call must end in 30 s."""
  stream = io.StringIO()
  p = _program(folder, stream)
  previous = signal.signal(signal.SIGALRM, lambda *a: pytest.fail("the first call hung"))
  signal.alarm(30)
  try:
    out = p(*ARGS)
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
  for got, want in zip(out, _want(), strict=True):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  return p, stream.getvalue().splitlines()


def _mode(path):
  return stat.S_IMODE(os.lstat(path).st_mode)


def test_created_private_whatever_the_umask(tmp_path):
  old = os.umask(0)
  try:
    folder = tmp_path / "new" / "programs"
    p, lines = _run(folder)
    assert p.how == "stored" and lines == []
    assert _mode(tmp_path / "new") == _mode(folder) == 0o700
    for f in folder.iterdir():  # the program, index.json, its lock
      assert _mode(f) == 0o600, f
    cache = tmp_path / "jax_cache" / "sub"
    saved = jax.config.jax_compilation_cache_dir
    try:
      assert runner.enable_compilation_cache(cache) == cache
    finally:
      jax.config.update("jax_compilation_cache_dir", saved)
    assert _mode(cache) == _mode(cache.parent) == 0o700
  finally:
    os.umask(old)


@pytest.mark.parametrize("how", ["world", "group", "owner"])
def test_a_folder_others_can_write_is_never_loaded_from(tmp_path, how):
  first, _ = _run(tmp_path)
  assert first.how == "stored"
  if how == "owner":
    os.chown(tmp_path, os.geteuid() + 4242, -1)
  else:
    os.chmod(tmp_path, 0o777 if how == "world" else 0o770)
  p, lines = _run(tmp_path)
  assert p.how == "jit" and len(lines) == 1, lines  # compiled, nothing read or written
  assert (
    "not used" in lines[0] and ("owned by uid" if how == "owner" else "writable by") in lines[0]
  )
  p, lines = _run(tmp_path)  # another program of the same process: said once
  assert p.how == "jit" and lines == []
  os.chmod(tmp_path, 0o700)
  os.chown(tmp_path, os.geteuid(), -1)
  assert _run(tmp_path)[0].how == "loaded"


def test_a_file_others_can_write_is_compiled_again(tmp_path):
  """Files written under ``umask 000`` by an older version: 0666, never read."""
  first, _ = _run(tmp_path)
  os.chmod(first.path, 0o666)
  p, lines = _run(tmp_path)
  assert p.how == "stored" and len(lines) == 1 and "UntrustedFile" in lines[0], lines
  assert _mode(p.path) == 0o600 and _run(tmp_path)[0].how == "loaded"
  os.chmod(tmp_path / _stored_programs.INDEX, 0o646)  # a forged index cannot vouch for a file
  p, lines = _run(tmp_path)
  assert p.how == "stored" and len(lines) == 1 and "UnrecordedProgram" in lines[0], lines
  assert _mode(tmp_path / _stored_programs.INDEX) == 0o600


@pytest.mark.parametrize("what", ["program", "index", "lock"])
def test_a_fifo_in_the_folder_never_hangs(tmp_path, what):
  first, _ = _run(tmp_path)
  target = {
    "program": first.path,
    "index": tmp_path / _stored_programs.INDEX,
    "lock": tmp_path / f"{_stored_programs.INDEX}.lock",
  }[what]
  target.unlink()
  os.mkfifo(target)
  if what == "lock":  # a program to store: the lock is taken
    first.path.unlink()
  p, lines = _run(tmp_path)
  assert len(lines) == 1, lines
  if what == "lock":
    assert p.how == "compiled" and "could not store" in lines[0] and "not a regular" in lines[0]
  else:  # neither a program nor an index: compiled, stored, the FIFO replaced
    assert p.how == "stored" and "unusable" in lines[0]
    assert _run(tmp_path)[0].how == "loaded"


def test_a_link_in_place_of_a_program_is_not_followed(tmp_path):
  first, _ = _run(tmp_path)
  real = tmp_path.parent / f"{tmp_path.name}-elsewhere.exe"
  real.write_bytes(first.path.read_bytes())
  first.path.unlink()
  first.path.symlink_to(real)
  p, lines = _run(tmp_path)
  assert p.how == "stored" and len(lines) == 1 and "UntrustedFile" in lines[0], lines
  assert not p.path.is_symlink() and real.exists()


def test_read_only_folder_with_a_stale_program_compiles_with_one_line(tmp_path, monkeypatch):
  """A read-only cache (root ignores permissions, so writes are made to fail): the stale
  file can be neither deleted nor replaced; one line, the right numbers, no crash."""
  first, _ = _run(tmp_path)
  first.path.write_bytes(b"stale")

  def refuse(*args, **kwargs):
    raise PermissionError(13, "Read-only file system")

  monkeypatch.setattr(Path, "unlink", refuse)
  monkeypatch.setattr(_stored_programs, "write_private", refuse)
  p, lines = _run(tmp_path)
  assert p.how == "compiled" and len(lines) == 1 and "unusable" in lines[0], lines
  p, lines = _run(tmp_path / "missing")  # nothing stale: the store's failure is the one line
  assert p.how == "compiled" and len(lines) == 1 and "could not store" in lines[0], lines
  p, lines = _run(tmp_path / "missing")  # the next program in that folder: said once
  assert p.how == "compiled" and lines == []
  assert p(*ARGS) is not None  # later calls run the compiled program


def test_program_with_effects_runs_through_its_jit_and_is_not_stored(tmp_path):
  def noisy(x, y):
    jax.debug.callback(lambda v: None, x)  # an effect, as an MPI collective's token
    return _step(x, y)

  stream = io.StringIO()
  p = runner.stored_program(jax.jit(noisy), "fx", "cfg", directory=tmp_path, stream=stream)
  for _ in range(3):
    out = p(*ARGS)
  np.testing.assert_array_equal(np.asarray(out[0]), np.asarray(_want()[0]))
  assert p.how == "jit" and stream.getvalue() == "" and not list(tmp_path.glob("*.exe"))


def test_unusable_compilation_cache_folder_turns_the_cache_off_with_one_line(tmp_path, capfd):
  saved = jax.config.jax_compilation_cache_dir
  blocker = tmp_path / "a-file"
  blocker.write_text("")
  good = tmp_path / "good"
  good.mkdir(mode=0o700)
  fifo_cache = tmp_path / "fifo"
  fifo_cache.mkdir(mode=0o700)
  os.mkfifo(fifo_cache / "abc-cache")
  open_cache = tmp_path / "open"
  open_cache.mkdir()
  os.chmod(open_cache, 0o777)
  try:
    for folder, why in (
      (blocker / "cache", "cannot be created"),  # e.g. a read-only $HOME
      (open_cache, "writable by group and others"),
      (fifo_cache, "not a regular file"),
    ):
      jax.config.update("jax_compilation_cache_dir", None)
      assert runner.enable_compilation_cache(folder) is None
      assert jax.config.jax_compilation_cache_dir is None
      (line,) = capfd.readouterr().err.splitlines()
      assert line.startswith(f"warning: compilation cache {folder} not used") and why in line
    assert runner.enable_compilation_cache(good) == good and capfd.readouterr().err == ""
  finally:
    jax.config.update("jax_compilation_cache_dir", saved)


def test_private_reads_refuse_what_is_not_a_private_regular_file(tmp_path):
  f = tmp_path / "f"
  _private_files.write_private(f, b"data")
  assert _private_files.read_private(f) == b"data" and _mode(f) == 0o600
  os.chmod(f, 0o620)
  with pytest.raises(_private_files.UntrustedFile, match="writable by group"):
    _private_files.read_private(f)
  with pytest.raises(_private_files.UntrustedFile, match="not a regular file"):
    _private_files.read_private(tmp_path)
  assert _private_files.folder_problem(tmp_path / "missing") is None
  assert _private_files.folder_problem(f) == "not a folder"
