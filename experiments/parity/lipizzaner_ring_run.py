"""One run of Lipizzaner's own clients and master on the library's ring (for
``lipizzaner_ring_outcome.py``): the scratch copy, its config, the processes, the final mixture.

The scratch copy and its torchvision patch are ``lipizzaner_side_by_side.py``'s
(``copy_and_patch``); the processes are started and stopped with ``_lipizzaner_run``'s
``Group`` (each in its own process group, all of them stopped at the end, on failure or on a
signal). Every client and the master run ``lipizzaner_ring_entry.py``, which adds the ring's
data set, networks and score to the reference at run time and then runs its ``main.py``.

The config is the reference's ``configuration/neurips2018/mnist/mnist-3x3.yml`` (with its
``general-3x3.yml``) with the fields below changed (:data:`FIELDS`); the run is done when the
master exits 0, i.e. after its own ``_gather_results``: each client's neighbourhood mixture
(its best generators and mixture weights) as a ``MixedGeneratorDataset`` of
``master.score_sample_size`` samples, scored, the best node logged as ``Best result: ...``.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import time
from pathlib import Path

from experiments.benchmarks._lipizzaner_run import Group, wait_listening
from experiments.benchmarks.lipizzaner_side_by_side import InputError, copy_and_patch, source_dir

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "lipizzaner_ring_entry.py"
PORTS = range(5000, 5009)  # 3x3: general-3x3.yml's 5000-5008, taken by the clients in order
# the master's log line; its score is the calculator's return value, here ``(tvd, None)``
BEST = re.compile(r"Best result: ([\d.]+):(\d+) = \(?([^,)\s]+)")
# mnist-3x3.yml's fields and what this study writes there ("{...}": filled per run)
FIELDS = {
  "n_iterations": "{iterations}",
  "default_adam_learning_rate": "0.001",
  "discriminator_skip_each_nth_step": "0",
  "mixture_sigma": "0.05",
  "enable_selection": "{selection}",
  "type": "ring_tvd",
  "cuda": "False",
  "fitness_sample_size": "500",
  "dataset_name": "ring8",
  "batch_size": "128",
  "n_batches": "250",
  "name: four_layer_perceptron": None,  # the network (below)
  "score_sample_size: 50000": None,  # the master's (below)
}


def _sub_all(pattern: str, repl: str, text: str, what: str) -> str:
  new, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
  if n == 0:
    raise InputError(
      f"--lipizzaner: the neurips2018 3x3 files have no {what}; cannot write the config"
    )
  return new


def write_config(
  src: Path, output_dir: Path, *, selection: bool, seed: int, iterations: int, eval_samples: int
) -> Path:
  """``configuration/neurips2018/ring-3x3.yml`` (and ``general-ring-3x3.yml``)."""
  conf = src / "configuration/neurips2018"
  general = (conf / "general-3x3.yml").read_text()
  general = _sub_all(r"^output_dir:.*$", f"output_dir: {output_dir}", general, "output_dir")
  general = _sub_all(r"^seed:.*$", f"seed: {seed}", general, "seed")
  general = _sub_all(r"^(\s*- address:).*$", r"\g<1> 127.0.0.1", general, "client address")
  (conf / "general-ring-3x3.yml").write_text(general)
  text = (conf / "mnist/mnist-3x3.yml").read_text()
  values = {"iterations": iterations, "selection": selection}
  for key, value in FIELDS.items():
    if value is not None:
      text = _sub_all(rf"^(\s*){key}:.*$", rf"\g<1>{key}: {value.format(**values)}", text, key)
  text = _sub_all(r"^(\s*)name: four_layer_perceptron.*$", r"\g<1>name: ring_mlp", text, "network")
  text = _sub_all(
    r"^(\s*)score_sample_size: 50000.*$",
    rf"\g<1>score_sample_size: {eval_samples}",
    text,
    "master score_sample_size",
  )
  text = _sub_all(
    r"!include \.\./general-3x3\.yml", "!include general-ring-3x3.yml", text, "general include"
  )
  path = conf / "ring-3x3.yml"
  path.write_text(text)
  return path


def _children_cpu() -> float:
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def _start_all(group, python, src, config, work, env, timeout, ports, entry):
  clients = []
  for i, port in enumerate(ports):
    log = work / f"client{i}.log"
    cmd = [python, str(entry), str(src), "train", "--distributed", "--client"]
    clients.append(group.start(cmd, src, env, log))
    wait_listening(port, clients[-1], min(300.0, timeout), log)
  cmd = [python, str(entry), str(src), "train", "--distributed", "--master", "-f", str(config)]
  return clients, group.start(cmd, src, env, work / "master.log")


def _raise_on_traceback(log: Path, i: int) -> None:
  """A client whose server thread died keeps its process alive and the master waits for ever
  (seen once: ``FileExistsError`` in the reference's ``_load_output_dir``); its log shows it."""
  if log.exists() and "Traceback (most recent call last)" in log.read_text(errors="replace"):
    raise RuntimeError(f"Lipizzaner's client {i} raised; see {log}")


def run_processes(
  python: str,
  src: Path,
  config: Path,
  work: Path,
  timeout: float,
  *,
  ports=PORTS,
  entry=ENTRY,
  eval_env: str = "RING_EVAL_DIR",
) -> dict:
  """Start the clients (one per port, each once its port listens; the ring's 9 by default)
  and the master, each through ``entry``; wait for the master to exit; stop every group.
  ``eval_env`` names ``work/eval`` to the entry. Returns the wall and CPU seconds (the
  children's, reaped by ``Group.stop``)."""
  env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
  env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
  env[eval_env] = str(work / "eval")
  (work / "eval").mkdir(exist_ok=True)
  group, cpu0, t0 = Group(), _children_cpu(), time.time()
  try:
    clients, master = _start_all(group, python, src, config, work, env, timeout, ports, entry)
    deadline = time.monotonic() + timeout
    while master.poll() is None:
      for i, c in enumerate(clients):
        if c.poll() is not None:
          raise RuntimeError(f"Lipizzaner's client {i} exited ({c.returncode}) before the end")
        _raise_on_traceback(work / f"client{i}.log", i)
      if time.monotonic() > deadline:
        raise RuntimeError(f"Lipizzaner did not finish in {timeout:.0f} s")
      time.sleep(1.0)
    if master.returncode != 0:
      raise RuntimeError(f"Lipizzaner's master exited ({master.returncode}); see {work}/master.log")
  finally:
    group.stop()
  return {"wall_s": round(time.time() - t0, 1), "cpu_s": round(_children_cpu() - cpu0, 1)}


def final_mixture(work: Path) -> dict:
  """The reference's pick (``Best result: ADDRESS:PORT = SCORE`` in the master's log: the
  lowest score, ``sorted(..., reverse=is_reversed)[-1]``) and its evaluation's samples."""
  import numpy as np

  found = BEST.findall((work / "master.log").read_text(errors="replace"))
  if not found:
    raise RuntimeError(f"no 'Best result' line in {work}/master.log")
  address, port, score = found[-1]
  scores = {}
  for path in sorted((work / "eval").glob("*.npz")):
    with np.load(path) as z:
      scores[path.stem] = float(z["score"])
  with np.load(work / "eval" / f"{address}-{port}.npz") as z:
    best = {k: z[k] for k in z.files}
  return {
    "cell": int(port) - PORTS[0],
    "score": float(score),
    "node_scores": {str(int(k.rsplit("-", 1)[1]) - PORTS[0]): v for k, v in scores.items()},
    "samples": best["samples"],
    "weights": best["weights"],
    "sources": [str(s) for s in best["sources"]],
  }


def reference_run(
  checkout,
  python,
  work: Path,
  *,
  selection: bool,
  seed: int,
  iterations: int,
  eval_samples: int,
  timeout: float,
) -> dict:
  """The whole run in ``work`` (emptied first: a reference run cannot resume)."""
  if work.exists():
    shutil.rmtree(work)
  work.mkdir(parents=True)
  src = work / "src"
  copy_and_patch(source_dir(Path(checkout)), src)
  config = write_config(
    src,
    work / "output",
    selection=selection,
    seed=seed,
    iterations=iterations,
    eval_samples=eval_samples,
  )
  # the reference's ``_load_output_dir`` (``output_dir/<trainer name>``, here lipizzaner_gan)
  # tests, then creates, in every client at once: made here first, no client races on it
  (work / "output" / "lipizzaner_gan").mkdir(parents=True)
  cost = run_processes(python, src, config, work, timeout)
  return {**cost, **final_mixture(work)}
