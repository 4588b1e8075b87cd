"""The notebooks are committed with their outputs (figures included), and those outputs come from
the current code: each notebook is executed again (``notebooks/run.py``: nbclient, a fresh
``python3`` kernel of this interpreter, ``MINMAXLAB_NOTEBOOK_SIZE=ci``) and every cell must print
the text it has stored (numbers to a relative 1e-4) and draw as many figures. After a change that
moves a notebook's output, ``python notebooks/run.py`` stores the new outputs."""

import importlib.util
import json
from pathlib import Path

import pytest

from tests import _xla

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

# notebook -> the PNG files it saves (its last cell prints their names: a stored text output)
FIGURES = {
  "bilinear_jacobian.ipynb": [
    "bilinear_jacobian_eigenvalues.png",
    "bilinear_radius_vs_step_size.png",
    "bilinear_lookahead_heatmap.png",
    "bilinear_lookahead_cycle.png",
    "bilinear_phase_portrait.png",
  ],
  "gan_jacobian.ipynb": [
    "gan_jacobian_eigenvalues.png",
    "gan_jacobian_losses.png",
  ],
  "lookahead_bilinear.ipynb": [
    "lookahead_bilinear_full_batch.png",
    "lookahead_bilinear_stochastic.png",
  ],
}


def _runner():
  spec = importlib.util.spec_from_file_location("notebooks_run", NOTEBOOKS / "run.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_every_notebook_is_committed_with_its_outputs():
  found = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
  assert found == sorted(FIGURES)
  total = 0
  for name in found:
    path = NOTEBOOKS / name
    total += path.stat().st_size
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["execution_count"] is not None for c in code), f"{name}: not executed"
    pngs = [o for c in code for o in c["outputs"] if "image/png" in o.get("data", {})]
    assert len(pngs) == len(FIGURES[name]), f"{name}: {len(pngs)} figures stored"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"], name
  assert total < 1_000_000, f"the notebooks take {total} bytes (PNG figures, < 1 MB in all)"


def test_output_comparison_tolerates_rounding_only():
  run = _runner()
  assert run.same_text("max 1.1e-16, [-0.000000, 0.5] 3/8\n", "max 2.2e-16, [0.000000, 0.5] 3/8\n")
  assert run.same_text("rate 0.123456", "rate 0.123457")
  assert not run.same_text("rate 0.12", "rate 0.13")
  assert not run.same_text("modes 3/8", "modes 4/8")
  assert not run.same_text("GDA 1.0", "EG 1.0")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_stored_outputs_come_from_the_current_code(name, monkeypatch):
  import nbformat

  # the kernel compiles XLA's default code, as a reader's does (tests/_xla.py)
  default = _xla.default_env()
  for var in ("XLA_FLAGS", _xla.LOW_EFFORT):
    monkeypatch.delenv(var, raising=False)
    if var in default:
      monkeypatch.setenv(var, default[var])
  run = _runner()
  stored = nbformat.read(NOTEBOOKS / name, as_version=4)
  fresh = run.execute(Path(name).stem)  # raises CellExecutionError on any failing cell
  assert run.images(fresh) == run.images(stored) == len(FIGURES[name])
  assert run.same_outputs(stored, fresh), (
    f"{name}: the stored outputs differ from a fresh run (python notebooks/run.py"
    f" {Path(name).stem} stores the new ones)\nstored: {run.text_outputs(stored)}\n"
    f"fresh: {run.text_outputs(fresh)}"
  )
