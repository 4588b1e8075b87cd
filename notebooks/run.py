"""Execute the notebooks and store their outputs (figures included) in the .ipynb files.

    python notebooks/run.py                 # every notebook in notebooks/
    python notebooks/run.py gan_jacobian    # one of them
    python notebooks/run.py --check         # execute and compare with the stored outputs

Each notebook runs top to bottom in a fresh ``python3`` kernel (nbclient; ipykernel's own spec
starts this interpreter) at ``MINMAXLAB_NOTEBOOK_SIZE=ci`` (seconds each), with matplotlib's
inline backend, so every figure a cell draws is stored as a PNG output; the PNG files the cells
also save go to a temporary folder. The documentation site renders the stored outputs
(mkdocs-jupyter, ``execute: false``); ``tests/analysis/test_notebooks.py`` re-executes each
notebook and compares its text outputs with the stored ones (:func:`text_outputs`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = sorted(p.stem for p in HERE.glob("*.ipynb"))


def execute(name: str, timeout: int = 600):
  """The notebook ``notebooks/<name>.ipynb`` executed at CI size (an ``nbformat`` node)."""
  import nbclient  # noqa: PLC0415
  import nbformat  # noqa: PLC0415

  nb = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
  env = {"MINMAXLAB_NOTEBOOK_SIZE": "ci", "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0"}
  saved = {k: os.environ.get(k) for k in (*env, "MINMAXLAB_FIGURES", "MPLBACKEND", "MATPLOTLIBRC")}
  with tempfile.TemporaryDirectory() as figures:
    Path(figures, "matplotlibrc").write_text("figure.dpi: 80\n")  # small stored PNGs
    os.environ.update(env, MINMAXLAB_FIGURES=figures, MATPLOTLIBRC=figures)
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend: figures become outputs
    try:
      client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        record_timing=False,
        resources={"metadata": {"path": str(HERE)}},
      )
      client.execute()
    finally:
      for k, v in saved.items():
        if v is None:
          os.environ.pop(k, None)
        else:
          os.environ[k] = v
  return nb


def text_outputs(nb) -> list[str]:
  """Per code cell, its printed text and plain-text results, joined (figures left out; how the
  kernel split a cell's stream into outputs depends on timing)."""
  cells = []
  for cell in nb.cells:
    if cell.cell_type != "code":
      continue
    texts = []
    for out in cell.get("outputs", []):
      if out.output_type == "stream":
        texts.append(out.text)
      elif out.output_type in ("execute_result", "display_data", "error"):
        data = out.get("data", {})
        if "image/png" not in data:
          texts.append(data.get("text/plain", "".join(out.get("traceback", []))))
    cells.append("".join(texts))
  return cells


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_text(stored: str, new: str, rel: float = 1e-4, tiny: float = 1e-9) -> bool:
  """The same text, its numbers equal to ``rel`` (and any two below ``tiny`` equal: rounding
  residues such as ``1.1e-16`` or ``-0.000000`` differ between machines)."""
  if _NUMBER.split(stored) != _NUMBER.split(new):
    return False
  for a, b in zip(_NUMBER.findall(stored), _NUMBER.findall(new), strict=True):
    x, y = float(a), float(b)
    if not (math.isclose(x, y, rel_tol=rel) or max(abs(x), abs(y)) < tiny):
      return False
  return True


def same_outputs(stored, new) -> bool:
  """Every code cell printed the same text (:func:`same_text`)."""
  a, b = text_outputs(stored), text_outputs(new)
  return len(a) == len(b) and all(same_text(x, y) for x, y in zip(a, b, strict=True))


def images(nb) -> int:
  """The number of PNG outputs."""
  return sum(
    "image/png" in out.get("data", {})
    for cell in nb.cells
    if cell.cell_type == "code"
    for out in cell.get("outputs", [])
  )


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("names", nargs="*", help=f"notebooks (default all: {', '.join(NOTEBOOKS)})")
  parser.add_argument("--check", action="store_true", help="compare with the stored outputs")
  args = parser.parse_args(argv)
  import nbformat  # noqa: PLC0415

  stale = []
  for name in args.names or NOTEBOOKS:
    name = Path(name).stem
    if name not in NOTEBOOKS:
      print(f"error: no notebook notebooks/{name}.ipynb", file=sys.stderr)
      return 2
    nb = execute(name)
    if args.check:
      stored = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
      same = same_outputs(stored, nb)
      stale += [] if same else [name]
      print(f"{name}: {'same outputs' if same else 'outputs differ'}")
    else:
      nbformat.write(nb, HERE / f"{name}.ipynb")
      size = (HERE / f"{name}.ipynb").stat().st_size
      print(f"{name}: {images(nb)} figures, {size / 1e3:.0f} kB")
  if stale:
    print(f"stale: {' '.join(stale)} (python notebooks/run.py {' '.join(stale)})", file=sys.stderr)
  return 1 if stale else 0


if __name__ == "__main__":
  sys.exit(main())
