"""One run of Lipizzaner's own clients and master on Fashion-MNIST, 2x2 (for
``lipizzaner_fmnist_outcome.py``): the scratch copy, its config, the processes, every node's
final mixture.

The scratch copy and its torchvision patch are ``lipizzaner_side_by_side.py``'s
(``copy_and_patch``), and so is the placing of the Fashion-MNIST IDX files where the
reference's ``mnist`` loader reads (``place_idx``); the processes are started and stopped with
``_lipizzaner_run``'s ``Group`` as in ``lipizzaner_ring_run.py``. Every client and the master
run ``lipizzaner_fmnist_entry.py`` (the reference's ``main.py``; the master also writes each
node's final mixture).

The config is the reference's ``configuration/neurips2018/mnist/mnist-2x2.yml`` (with its
``general-2x2.yml``) with only the fields of :data:`FIELDS` changed: the length, the CPU, the
master's sample count, the seed, the output folder and the clients' address.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from experiments.benchmarks.lipizzaner_side_by_side import (
  InputError,
  copy_and_patch,
  place_idx,
  source_dir,
)
from experiments.parity import lipizzaner_ring_run as ring_run

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "lipizzaner_fmnist_entry.py"
PORTS = range(5000, 5004)  # 2x2: general-2x2.yml's 5000-5003, taken by the clients in order
# mnist-2x2.yml's fields and what this study writes there ("{...}": filled per run)
FIELDS = {
  "n_iterations": "{iterations}",
  "n_batches": "{batches}",
  "cuda": "False",  # the score's and the master's
  "score_sample_size: 50000": "score_sample_size: {eval_samples}",  # the master's
}


def _sub_all(pattern: str, repl: str, text: str, what: str) -> str:
  new, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
  if n == 0:
    raise InputError(f"--lipizzaner: the neurips2018 2x2 files have no {what}; cannot write config")
  return new


def config_text(mnist_2x2: str, *, iterations: int, batches: int, eval_samples: int) -> str:
  """``mnist-2x2.yml``'s text with :data:`FIELDS` filled in and the study's general file."""
  values = {"iterations": iterations, "batches": batches, "eval_samples": eval_samples}
  text = mnist_2x2
  for key, value in FIELDS.items():
    field = key.split(":")[0]
    if ":" in key:  # one particular line (the master's sample count)
      pattern, repl = rf"^(\s*){re.escape(key)}\s*$", rf"\g<1>{value.format(**values)}"
    else:
      pattern, repl = rf"^(\s*){field}:.*$", rf"\g<1>{field}: {value.format(**values)}"
    text = _sub_all(pattern, repl, text, field)
  return _sub_all(
    r"!include \.\./general-2x2\.yml", "!include general-fmnist-2x2.yml", text, "general include"
  )


def general_text(general_2x2: str, *, output_dir: Path, seed: int) -> str:
  """``general-2x2.yml``'s text: the output folder, the seed, the clients on 127.0.0.1."""
  text = _sub_all(r"^output_dir:.*$", f"output_dir: {output_dir}", general_2x2, "output_dir")
  text = _sub_all(r"^seed:.*$", f"seed: {seed}", text, "seed")
  return _sub_all(r"^(\s*- address:).*$", r"\g<1> 127.0.0.1", text, "client address")


def write_config(
  src: Path, output_dir: Path, *, seed: int, iterations: int, batches: int, eval_samples: int
) -> Path:
  """``configuration/neurips2018/fmnist-2x2.yml`` (and ``general-fmnist-2x2.yml``)."""
  conf = src / "configuration/neurips2018"
  general = general_text((conf / "general-2x2.yml").read_text(), output_dir=output_dir, seed=seed)
  (conf / "general-fmnist-2x2.yml").write_text(general)
  text = config_text(
    (conf / "mnist/mnist-2x2.yml").read_text(),
    iterations=iterations,
    batches=batches,
    eval_samples=eval_samples,
  )
  path = conf / "fmnist-2x2.yml"
  path.write_text(text)
  return path


def run_processes(python: str, src: Path, config: Path, work: Path, timeout: float) -> dict:
  """The ring's :func:`lipizzaner_ring_run.run_processes` with this study's 4 ports, entry and
  ``FMNIST_EVAL_DIR``: the wall and CPU seconds of the children."""
  return ring_run.run_processes(
    python, src, config, work, timeout, ports=PORTS, entry=ENTRY, eval_env="FMNIST_EVAL_DIR"
  )


BEST = re.compile(r"Best result: ([\d.]+):(\d+) = \(?([^,)\s]+)")


def node_mixtures(work: Path) -> dict:
  """Every node's final mixture as the master wrote it (``eval/<address>-<port>.npz``), by cell
  (port - 5000), and the reference's own pick (the master's ``Best result`` line: the lowest
  of its FIDs)."""
  import numpy as np

  nodes = {}
  for path in sorted((work / "eval").glob("*.npz")):
    with np.load(path) as z:
      cell = int(path.stem.rsplit("-", 1)[1]) - PORTS[0]
      nodes[cell] = {k: z[k] for k in z.files}
  if len(nodes) != len(PORTS):
    raise RuntimeError(f"the master wrote {len(nodes)} of {len(PORTS)} mixtures in {work}/eval")
  found = BEST.findall((work / "master.log").read_text(errors="replace"))
  if not found:
    raise RuntimeError(f"no 'Best result' line in {work}/master.log")
  return {"nodes": nodes, "reference_pick": int(found[-1][1]) - PORTS[0]}


def reference_run(
  checkout, python, work: Path, *, idx, seed, iterations, batches, eval_samples, timeout
) -> dict:
  """The whole run in ``work`` (emptied first: a reference run cannot resume)."""
  if work.exists():
    shutil.rmtree(work)
  work.mkdir(parents=True)
  src = work / "src"
  copy_and_patch(source_dir(Path(checkout)), src)
  output = work / "output"
  config = write_config(
    src, output, seed=seed, iterations=iterations, batches=batches, eval_samples=eval_samples
  )
  place_idx(Path(idx), output)
  (output / "lipizzaner_gan").mkdir(parents=True)  # _load_output_dir races between clients
  cost = run_processes(python, src, config, work, timeout)
  return {**cost, **node_mixtures(work)}
