"""The analysis notebooks run top to bottom at CI size and save their figures.

Each notebook is executed by nbclient in a fresh ``python3`` kernel (ipykernel's
own spec, which jupyter_client starts with this interpreter, so the venv's
packages are used and nothing is registered globally), with
``MINMAXLAB_NOTEBOOK_SIZE=ci`` and ``MINMAXLAB_FIGURES`` pointing to a
temporary directory.
"""

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

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


def test_every_notebook_is_tested_and_committed_without_outputs():
  found = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
  assert found == sorted(FIGURES)
  for name in found:
    nb = json.loads((NOTEBOOKS / name).read_text())
    for cell in nb["cells"]:
      if cell["cell_type"] == "code":
        assert cell["outputs"] == [] and cell["execution_count"] is None, name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_runs_at_ci_size(name, tmp_path, monkeypatch):
  figures = tmp_path / "figures"
  monkeypatch.setenv("MINMAXLAB_NOTEBOOK_SIZE", "ci")
  monkeypatch.setenv("MINMAXLAB_FIGURES", str(figures))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  nb = nbformat.read(NOTEBOOKS / name, as_version=4)
  client = nbclient.NotebookClient(
    nb,
    kernel_name="python3",
    timeout=300,
    resources={"metadata": {"path": str(NOTEBOOKS)}},
  )
  client.execute()  # raises CellExecutionError on any failing cell
  for fig in FIGURES[name]:
    path = figures / fig
    assert path.is_file() and path.stat().st_size > 10_000, fig
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
