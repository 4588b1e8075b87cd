#!/usr/bin/env python3
"""Set up the project's virtual environment and run its main job or its tests.

  python3 dev.py main  [flags...]  the main demo: spatial coevolution on the 8-Gaussian ring
                                  (writes runs/coevolution_ring8; flags go to
                                  experiments.coevolution.main). Run it again: an
                                  unfinished run resumes, a finished one is reported.
  python3 dev.py test  [pytest args...]
  python3 dev.py mpi               add the MPI stack to .venv (the MPICH wheel, mpi4py, and
                                  mpi4jax compiled against it) for the mpirun commands:
                                  .venv/bin/mpirun -n 4 .venv/bin/python -m ...
  python3 dev.py bench             the benchmarks under experiments/benchmarks
  python3 dev.py mincheck          install the declared minimum versions (the floors of
                                  pyproject.toml) into a throwaway venv and run a short
                                  import + smoke test there (.ci/min_versions_smoke.py)
  python3 dev.py setup             only create/update the full environment

Needs only Python >= 3.11 with pip and venv. The environment lives in .venv and
is reinstalled when pyproject.toml changes. `main` installs only the library's
own dependencies (no MPI, tensorflow-datasets or dev tools); `test`, `bench` and
`setup` add the dev, tfds and docs extras and the MPI stack to the same .venv. As root
on Debian, `test` also installs the real Fashion-MNIST files (package
dataset-fashion-mnist) when they are missing; tests that need them skip otherwise.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".minmaxlab-installed"  # the full environment (test, bench, setup)
MAIN_STAMP = VENV / ".minmaxlab-main"  # the library's own dependencies only (main)
EXTRAS = "dev,tfds,docs"  # docs: tests/test_docs.py builds the site with --strict
FASHION = Path("/usr/share/datasets/fashion-mnist")


def run(cmd, **kw):
  print("+", " ".join(map(str, cmd)), flush=True)
  return subprocess.run(cmd, **kw)


def _digest(full: bool) -> str:
  recipe = (EXTRAS + "|mpich,mpi4py,mpi4jax").encode() if full else b"base"  # change to reinstall
  return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + recipe).hexdigest()


def _stamped(stamp: Path, full: bool) -> bool:
  return stamp.exists() and stamp.read_text() == _digest(full) and PY.exists()


def ensure_venv(full: bool = True) -> None:
  """Create or update .venv: the full environment, or (``full=False``, for ``main``)
  the project with only its own dependencies. A full environment serves both."""
  if _stamped(STAMP, True) or (not full and _stamped(MAIN_STAMP, False)):
    return
  if not PY.exists():
    run([sys.executable, "-m", "venv", str(VENV)], check=True)
  run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
  target = f".[{EXTRAS}]" if full else "."
  run([str(PY), "-m", "pip", "install", "-q", "-e", target], check=True, cwd=ROOT)
  if full:
    install_mpi()
    STAMP.write_text(_digest(True))
  MAIN_STAMP.write_text(_digest(False))


def cuda_root() -> str | None:
  """The CUDA toolkit root (the folder holding include/cuda_runtime.h), or None.

  mpi4jax's build guesses the root from `nvcc`'s location; where nvcc is linked
  from outside the toolkit (e.g. /usr/local/bin/nvcc) the guess is wrong and the
  build dies on cuda_runtime.h, so it is told explicitly (CUDA_PATH)."""
  candidates = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
  nvcc = shutil.which("nvcc")
  if nvcc:
    candidates.append(str(Path(nvcc).resolve().parent.parent))
  candidates += ["/usr/local/cuda", *sorted(map(str, Path("/usr/local").glob("cuda-*")))]
  for c in candidates:
    if c and (Path(c) / "include" / "cuda_runtime.h").exists():
      return str(Path(c).resolve())
  return None


# The MPI install route of README.md and docs/running.md, in two steps because mpi4jax has no
# wheel and compiles against the mpicc it finds on PATH, which only the MPICH wheel provides:
# pip builds every wheel of one command before it installs any, so ".[mpi]" alone fails.
MPI_ROUTE = (["mpich"], ["--no-cache-dir", ".[mpi]"])


def install_mpi() -> None:
  """MPI for the mpirun tests and backends, by the documented route (``MPI_ROUTE``) in .venv
  as in an activated venv (its bin first on PATH, where the first step puts mpicc), the
  project editable: the MPICH wheel (a launcher that runs as root, any number of ranks, no
  flags), then the mpi extra (mpi4py, and mpi4jax compiled against that mpicc;
  --no-cache-dir: never reuse a wheel built against another MPI)."""
  env = dict(
    os.environ,
    PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    VIRTUAL_ENV=str(VENV),
  )
  root = cuda_root()
  if root:
    env["CUDA_PATH"] = root
  first, second = MPI_ROUTE
  run([str(PY), "-m", "pip", "install", "-q", *first], check=True, env=env)
  second = [*second[:-1], "-e", second[-1]]  # this checkout stays editable
  run([str(PY), "-m", "pip", "install", "-q", *second], check=True, env=env, cwd=ROOT)


MPI_READY = "import mpi4py, mpi4jax"  # what the MPI backends import


def ensure_mpi() -> int:
  """``dev.py mpi``: the MPI stack in .venv (one step after ``dev.py main``: the documented
  two-step route, the MPICH wheel first, then ``.[mpi]`` whose mpi4jax compiles against its
  mpicc); nothing is done when it is there already."""
  mpirun = VENV / "bin" / "mpirun"
  ready = mpirun.exists() and subprocess.run([str(PY), "-c", MPI_READY]).returncode == 0
  if not ready:
    install_mpi()
  print(f"MPI ready: {mpirun} -n 4 {PY} -m experiments.coevolution.main ... --config.backend=mpi")
  return 0


def ensure_fashion_mnist() -> None:
  if FASHION.exists() or os.geteuid() != 0 or not shutil.which("apt-get"):
    return
  env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
  if run(["apt-get", "update", "-qq"], env=env).returncode == 0:
    run(["apt-get", "install", "-y", "-qq", "dataset-fashion-mnist"], env=env)


def floor_pins(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
  """``name==floor`` for every base dependency of ``pyproject`` (its ``>=`` floor); jax's
  floor pins jaxlib too. A dependency without a floor is an error: its minimum is untested."""
  import re
  import tomllib

  pins = []
  for req in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
    m = re.match(r"^([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9.]*)\s*(,.*)?$", req)
    if not m:
      raise SystemExit(f"dependency {req!r} in {pyproject.name} has no >= floor to test")
    pins.append(f"{m.group(1)}=={m.group(2)}")
    if m.group(1).lower() == "jax":
      pins.append(f"jaxlib=={m.group(2)}")
  return pins


def mincheck(keep: bool = False) -> int:
  """Install the floors of the base dependencies (and the project, not editable) into a
  throwaway venv, then run .ci/min_versions_smoke.py there with warnings as errors."""
  import tempfile
  import time

  t0 = time.perf_counter()
  pins = floor_pins()
  tmp = Path(tempfile.mkdtemp(prefix="minmaxlab-mincheck-"))
  venv, constraints = tmp / "venv", tmp / "floors.txt"
  constraints.write_text("\n".join(pins) + "\n")
  py = venv / "bin" / "python"
  try:
    # Built from a copy: an in-tree build would leave build/ (and stale modules) in the checkout.
    src = tmp / "src"
    shutil.copytree(
      ROOT / "minmaxlab", src / "minmaxlab", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
      shutil.copy2(ROOT / name, src / name)
    run([sys.executable, "-m", "venv", str(venv)], check=True)
    rc = run([str(py), "-m", "pip", "install", "-q", "-c", str(constraints), str(src)]).returncode
    t_install = time.perf_counter() - t0
    if rc:
      print(f"mincheck: installing the floors failed ({' '.join(pins)})", flush=True)
      return rc
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True)
    names = {p.split("==")[0].lower() for p in pins}
    print(
      "mincheck: installed",
      *[x for x in freeze.stdout.split() if x.split("==")[0].lower() in names],
    )
    env = dict(os.environ, PYTHONWARNINGS="error", JAX_PLATFORMS="cpu", MPLBACKEND="Agg")
    env.pop("PYTHONPATH", None)
    rc = run_child([str(py), str(ROOT / ".ci" / "min_versions_smoke.py")], env=env, cwd=tmp)
    total = time.perf_counter() - t0
    print(
      f"mincheck: {'passed' if rc == 0 else 'FAILED'} in {total:.0f} s (install {t_install:.0f} s)"
    )
    return rc
  finally:
    if keep:
      print(f"mincheck: kept {tmp}")
    else:
      shutil.rmtree(tmp, ignore_errors=True)


def run_child(cmd: list[str], env: dict | None = None, cwd: Path = ROOT) -> int:
  """Run ``cmd`` and return its status. Ctrl-C reaches the child as well (same process
  group): it is left to the child to finish and report, so this process prints no
  traceback of its own.

  While the child runs, SIGINT here runs a handler that does nothing (not ``SIG_IGN``,
  which the child would inherit through ``exec``): a ``KeyboardInterrupt`` raised between
  ``waitpid`` reaping the child and ``Popen`` storing its status would lose the status
  (the next wait finds no child and reports 0)."""
  print("+", " ".join(map(str, cmd)), flush=True)
  previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
  try:
    child = subprocess.Popen(cmd, cwd=cwd, env=env)
    return child.wait()
  finally:
    signal.signal(signal.SIGINT, previous)


def main(argv: list[str]) -> int:
  if argv and argv[0] in {"-h", "--help", "help"}:
    print(__doc__)
    return 0
  if not argv or argv[0] not in {"main", "test", "bench", "setup", "mincheck", "mpi"}:
    if argv:
      print(f"unknown command: {argv[0]}", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 2
  cmd, rest = argv[0], argv[1:]
  if cmd == "mincheck":  # needs no .venv: a throwaway one of its own
    return mincheck(keep="--keep" in rest)
  ensure_venv(full=cmd not in ("main", "mpi"))
  if cmd == "setup":
    return 0
  if cmd == "mpi":
    return ensure_mpi()
  if cmd == "main":
    # The main demo: spatial coevolution on the 8-Gaussian ring (embedded data, no download).
    typed = " ".join(["python3", "dev.py", *map(shlex.quote, argv)])
    if not any(a.startswith("--config=") or a == "--config" for a in rest):
      rest = ["--config", "experiments/coevolution/configs/ring8_3x3.py", *rest]
    if not any(a.startswith("--workdir") for a in rest):
      rest = ["--workdir", "runs/coevolution_ring8", *rest]
    env = dict(os.environ, MINMAXLAB_RERUN=typed)
    return run_child([str(PY), "-m", "experiments.coevolution.main", *rest], env=env)
  if cmd == "bench":
    rc = 0
    for script in sorted((ROOT / "experiments" / "benchmarks").glob("*.py")):
      if script.name == "speed_claims.py":  # reruns four of the others at the README's sizes
        continue
      rc |= run_child([str(PY), str(script), *rest])
    return rc
  ensure_fashion_mnist()
  workers = ["-n", "2"] if "-n" not in rest else []
  if not any(a.startswith("--dist") for a in rest):
    # one test file per unit of work (its module fixtures and compiled programs are shared
    # by its tests), in the order of tests/conftest.py (files with slow tests first)
    workers += ["--dist", "loadfile", "--no-loadscope-reorder"]
  # the slowest tests, printed at the end of every run: where CI's 20 minutes go
  durations = [] if any(a.startswith("--durations") for a in rest) else ["--durations=20"]
  rc = run_child([str(PY), "-m", "pytest", "-q", *workers, *durations, *rest])
  if rc == 5:  # pytest: no tests collected
    print("pytest collected no tests", flush=True)
    return 0
  return rc


if __name__ == "__main__":
  try:
    sys.exit(main(sys.argv[1:]))
  except KeyboardInterrupt:
    print(f"\ninterrupted while setting up {VENV.name}; run the same command again", flush=True)
    sys.exit(130)
