"""Lipizzaner itself and minmaxlab's equal-work generation, on this host, one run (one JSON line).

The project ships no Lipizzaner code: point ``--lipizzaner`` at your own checkout of
``ALFA-group/lipizzaner-gan`` and ``--python`` at an interpreter that has its requirements
(PyTorch and torchvision on the CPU, flask, deap, netaddr, netifaces, pymongo, losswise,
pyyaml, scipy, matplotlib). This script then runs the protocol of
``experiments/coevolution/README.md`` ("Lipizzaner itself, side by side"):

1. copies the checkout's ``src/`` into ``--workdir`` (your checkout is not touched) and makes
   the two changes today's torchvision needs: one-value ``Normalize`` mean and std in
   ``data/data_loader.py`` and ``training/mixture/score_factory.py`` (the old torchvision used
   only the first of the three 0.5s for 1-channel images);
2. writes a config from its ``configuration/lipizzaner-gan/mnist.yml``: ``--iterations``
   iterations, ``cuda: False``, no final master score, the output under ``--workdir``, and
   the 2x2 grid of local clients of ``configuration/general.yml`` (ports 5000-5003, which
   Lipizzaner's clients take in order; they must be free);
3. puts MNIST-format IDX files (``--idx``; default Debian's Fashion-MNIST, the same format
   and shapes as MNIST, which is all the timing depends on) where torchvision's ``MNIST``
   looks (``<output>/data/MNIST/raw/``), since nothing can be downloaded;
4. starts the four clients one after another (each once its port listens), then the master,
   every process in its own process group with ``OMP_NUM_THREADS=1`` and
   ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (Lipizzaner pickles whole objects between clients),
   samples each client's CPU seconds from ``/proc/<pid>/stat`` four times a second, and stops
   every process group once each client has logged the last batch of the last iteration
   (or on any failure, timeout or signal);
5. reads each client's log lines ``Iteration k, Batch b/N`` (``b`` from 0): an iteration's
   seconds are from the first batch of iteration ``k`` to that of ``k + 1`` (``iterations - 1``
   intervals per client), its CPU seconds the four clients' CPU over the same span;
6. runs ``coevolution_throughput.py --floor`` right after on the same host (or reads a
   JSON line of it from ``--floor_json``) and divides: Lipizzaner's median seconds per
   iteration by the library's median seconds per generation of the same schedule and
   fitness work, and the CPU seconds likewise.

Lipizzaner's MNIST mixture score (FID through its bundled classifier) stays on, seconds of
each client's iteration that the floor generation leaves out: the JSON gives them (from its
``Calculating FID`` log line to the next) and the ratio without them.

  python experiments/benchmarks/lipizzaner_side_by_side.py --lipizzaner ~/lipizzaner-gan \\
      --python ~/lipizzaner-venv/bin/python [--iterations 4] [--idx DIR] [--workdir DIR]
      [--floor_generations 9] [--floor_json FILE] [--timeout_s 3600]

Without ``--lipizzaner`` it prints a JSON line that says it skipped (``dev.py bench`` runs
every script here). Errors in the input (a missing checkout, an interpreter without torch, a
busy port, source that cannot be patched) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.benchmarks import _harness as h  # noqa: E402
from experiments.benchmarks._lipizzaner_run import (  # noqa: E402
  PORTS,
  Group,
  fid_seconds,
  run_lipizzaner,
  summarise,
)

HERE = Path(__file__).resolve().parent
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IDX_FILES = (
  "train-images-idx3-ubyte",
  "train-labels-idx1-ubyte",
  "t10k-images-idx3-ubyte",
  "t10k-labels-idx1-ubyte",
)
NORMALIZE = re.compile(
  r"Normalize\(\s*mean=\(0\.5,\s*0\.5,\s*0\.5\),\s*std=\(0\.5,\s*0\.5,\s*0\.5\)\s*\)"
)
PATCHED = ("data/data_loader.py", "training/mixture/score_factory.py")


class InputError(Exception):
  """A problem with the user's input: one line, exit status 2."""


# ---------------------------------------------------------------- preparation
def source_dir(checkout: Path) -> Path:
  """The checkout's ``src/`` (or the checkout itself when it is that folder)."""
  for src in (checkout / "src", checkout):
    if (src / "main.py").is_file() and (src / "configuration/lipizzaner-gan/mnist.yml").is_file():
      return src
  raise InputError(
    f"--lipizzaner {checkout}: no Lipizzaner checkout there (want src/main.py and"
    " src/configuration/lipizzaner-gan/mnist.yml of ALFA-group/lipizzaner-gan)"
  )


def copy_and_patch(src: Path, dest: Path) -> None:
  ignore = shutil.ignore_patterns("lipizzaner-dashboard", "mnist-generators", "*.pt", ".git")
  shutil.copytree(src, dest, ignore=ignore)
  for rel in PATCHED:
    path = dest / rel
    text = path.read_text() if path.is_file() else ""
    new, n = NORMALIZE.subn("Normalize(mean=(0.5,), std=(0.5,))", text)
    if n == 0:
      raise InputError(
        f"--lipizzaner: cannot patch {rel} (no three-value Normalize(mean=..., std=...) in it):"
        " its source differs from the one this protocol was written for (commit f411cb5)"
      )
    path.write_text(new)


def _sub_all(pattern: str, repl: str, text: str, what: str) -> str:
  new, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
  if n == 0:
    raise InputError(f"--lipizzaner: mnist.yml/general.yml has no {what}; cannot write the config")
  return new


def write_config(src: Path, output_dir: Path, iterations: int) -> Path:
  """``configuration/lipizzaner-gan/side_by_side.yml`` (and its ``general`` include)."""
  conf = src / "configuration"
  general = (conf / "general.yml").read_text() if (conf / "general.yml").is_file() else ""
  general = _sub_all(r"^output_dir:.*$", f"output_dir: {output_dir}", general, "output_dir")
  ports = f"port: {PORTS[0]}-{PORTS[-1]}"
  general = _sub_all(r"^(\s*)port:.*$", rf"\g<1>{ports}", general, "client port range")
  (conf / "general_side_by_side.yml").write_text(general)
  mnist = (conf / "lipizzaner-gan/mnist.yml").read_text()
  mnist = _sub_all(
    r"^(\s*)n_iterations:.*$", rf"\g<1>n_iterations: {iterations}", mnist, "n_iterations"
  )
  mnist = _sub_all(r"^(\s*)n_batches:.*$", r"\g<1>n_batches: 0", mnist, "n_batches")
  mnist = _sub_all(r"^(\s*)cuda:.*$", r"\g<1>cuda: False", mnist, "cuda")
  mnist = _sub_all(
    r"^(\s*)calculate_score:.*$", r"\g<1>calculate_score: False", mnist, "master calculate_score"
  )
  mnist = _sub_all(
    r"!include \.\./general\.yml", "!include ../general_side_by_side.yml", mnist, "general include"
  )
  path = conf / "lipizzaner-gan/side_by_side.yml"
  path.write_text(mnist)
  return path


def place_idx(idx: Path, output_dir: Path) -> None:
  raw = output_dir / "data/MNIST/raw"
  raw.mkdir(parents=True, exist_ok=True)
  for name in IDX_FILES:
    plain, packed = idx / name, idx / f"{name}.gz"
    if plain.is_file():
      shutil.copyfile(plain, raw / name)
    elif packed.is_file():
      with gzip.open(packed, "rb") as f_in, open(raw / name, "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    else:
      raise InputError(f"--idx {idx}: no {name} (or {name}.gz) there")


def check_interpreter(python: str, modules: str) -> None:
  try:
    out = subprocess.run(
      [python, "-c", f"import {modules}"],
      capture_output=True,
      text=True,
      timeout=300,
    )
  except (OSError, subprocess.TimeoutExpired) as e:
    raise InputError(f"--python {python}: cannot run it ({e})") from None
  if out.returncode != 0:
    last = (out.stderr.strip().splitlines() or ["?"])[-1]
    raise InputError(f"--python {python}: Lipizzaner's requirements are missing there ({last})")


def check_ports_free() -> None:
  for port in PORTS:
    with socket.socket() as s:
      s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not in use
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        raise InputError(
          f"port {port} is in use: Lipizzaner's clients take ports {PORTS[0]}-{PORTS[-1]}"
        ) from None


def floor_result(args) -> dict:
  if args.floor_json:
    try:
      lines = Path(args.floor_json).read_text().strip().splitlines()
      return json.loads(lines[-1])
    except (OSError, ValueError, IndexError) as e:
      raise InputError(
        f"--floor_json {args.floor_json}: not a JSON line of --floor ({e})"
      ) from None
  cmd = [sys.executable, str(HERE / "coevolution_throughput.py"), "--floor", "--strategies", "map"]
  cmd += ["--generations", str(args.floor_generations)]
  group = Group()
  log = Path(args.workdir) / "floor.out"
  try:
    p = group.start(cmd, Path.cwd(), dict(os.environ), log)
    if p.wait() != 0:
      tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
      raise RuntimeError(f"the floor benchmark failed ({p.returncode}): {tail[0]}")
  finally:
    group.stop()
  return json.loads(log.read_text().strip().splitlines()[-1])


def library_figures(floor: dict) -> dict:
  try:
    prog = floor["programs"]["map_s600_d2"]
    return {
      "source": "coevolution_throughput.py --floor (map cells, schedule=lipizzaner, d_every=2)",
      "median_s": prog["median_s"],
      "cpu_s_median": prog["cpu_s_median"],
      "matmul_gflop_per_generation": prog["matmul_gflop_per_generation"],
      "ratio_to_floor_median": prog.get("ratio_to_floor_median"),
      "cpu_model": floor.get("machine", {}).get("cpu_model"),
    }
  except (KeyError, TypeError):
    raise InputError(
      "--floor_json: no programs.map_s600_d2 in it (run --floor --strategies map)"
    ) from None


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--lipizzaner", default=None, help="your checkout of ALFA-group/lipizzaner-gan")
  ap.add_argument(
    "--python", default="python3", help="an interpreter with Lipizzaner's requirements"
  )
  ap.add_argument("--iterations", type=int, default=4)
  ap.add_argument("--idx", default=str(DEBIAN_FASHION_MNIST), help="MNIST-format IDX files")
  ap.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
  ap.add_argument("--floor_generations", type=int, default=9)
  ap.add_argument("--floor_json", default=None, help="a JSON line of --floor instead of a new run")
  ap.add_argument("--timeout_s", type=float, default=3600.0)
  ap.add_argument(
    "--check_imports",
    default="torch, torchvision, flask, yaml",
    help="what --python must import before anything starts",
  )
  args = ap.parse_args(argv)
  if args.lipizzaner is None:  # e.g. under `dev.py bench`, which runs every script here
    skipped = "no --lipizzaner checkout given (the project ships no Lipizzaner code)"
    print(json.dumps({"benchmark": "lipizzaner_side_by_side", "skipped": skipped}))
    return 0
  if args.iterations < 2:
    raise InputError(f"--iterations {args.iterations}: need at least 2 (one interval per client)")
  checkout = Path(args.lipizzaner).expanduser()
  src = source_dir(checkout)
  check_interpreter(args.python, args.check_imports)
  check_ports_free()
  args.workdir = args.workdir or tempfile.mkdtemp(prefix="lipizzaner_side_by_side_")
  work = Path(args.workdir).resolve()
  work.mkdir(parents=True, exist_ok=True)
  run_src = work / "src"
  if run_src.exists():
    raise InputError(f"--workdir {work}: already holds a src/ (give a new folder)")
  copy_and_patch(src, run_src)
  output_dir = work / "output"
  config = write_config(run_src, output_dir, args.iterations)
  place_idx(Path(args.idx), output_dir)
  commit = subprocess.run(
    ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
  ).stdout.strip()
  load_before = list(os.getloadavg())
  t0 = datetime.datetime.now(datetime.UTC)
  progress, samples, wall = run_lipizzaner(
    args.python, run_src, config, work, args.iterations, args.timeout_s
  )
  fids = [fid_seconds(work / f"client{i}.log") for i in range(len(PORTS))]
  lip = summarise(progress, samples, args.iterations, fids)
  lip.update(commit=commit or None, run_wall_s=round(wall, 1))
  t1 = datetime.datetime.now(datetime.UTC)
  lib = library_figures(floor_result(args))
  h.emit(
    {
      "benchmark": "lipizzaner_side_by_side",
      "machine": h.host(),
      "lipizzaner_utc": [t0.isoformat(timespec="seconds"), t1.isoformat(timespec="seconds")],
      "load_average_before": load_before,
      "work": "2x2 grid, MNIST MLP GANs, a full epoch per iteration; Lipizzaner's mixture FID on"
      " (lipizzaner.fid_s_median of each client's iteration), the floor generation without it",
      "lipizzaner": lip,
      "minmaxlab": lib,
      "wall_ratio": round(lip["median_s"] / lib["median_s"], 2),
      "cpu_ratio": round(lip["client_cpu_s_per_generation"] / lib["cpu_s_median"], 2),
      "wall_ratio_without_fid": (
        round(lip["median_s_without_fid"] / lib["median_s"], 2)
        if lip["median_s_without_fid"]
        else None
      ),
    }
  )
  return 0


def _terminate(signum, frame):
  raise SystemExit(128 + signum)  # runs the finally blocks that stop the process groups


if __name__ == "__main__":
  signal.signal(signal.SIGTERM, _terminate)
  try:
    sys.exit(main())
  except KeyboardInterrupt:
    print(
      "lipizzaner_side_by_side: interrupted; every process it started was stopped", file=sys.stderr
    )
    sys.exit(130)
  except InputError as e:
    print(f"lipizzaner_side_by_side: {e}", file=sys.stderr)
    sys.exit(2)
  except RuntimeError as e:
    print(f"lipizzaner_side_by_side: {e}", file=sys.stderr)
    sys.exit(1)
