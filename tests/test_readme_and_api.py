"""The README's code runs and the main job runs (the public surface is pinned in
test_public_api.py)."""

import json
import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks():
  return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_training_step_runs_and_converges():
  code = _python_blocks()[0]
  assert "lookahead_minmax(optax.adam(" in code
  scope = {}
  exec(compile(code, "README.md", "exec"), scope)
  slow = scope["slow"]
  # f = x^T y + 0.1 sum(x) - 0.1 sum(y): equilibrium x* = 0.1, y* = -0.1.
  np.testing.assert_allclose(np.asarray(slow.min), 0.1, atol=2e-2)
  np.testing.assert_allclose(np.asarray(slow.max), -0.1, atol=2e-2)


def test_readme_has_exactly_two_setup_commands_at_top():
  text = (ROOT / "README.md").read_text()
  first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
  commands = [l for l in first_block.splitlines() if l.strip() and not l.startswith("#")]
  assert [c.split("#")[0].strip() for c in commands] == [
    "python3 dev.py main",
    "python3 dev.py test",
  ]


def test_readme_is_a_front_page():
  """Issue 35: what the library is in the first lines, the two commands and a runnable example
  with its output in the first 40, about 200 lines in all (the generated results summary
  included), and every link to a file of the repository resolves."""
  text = (ROOT / "README.md").read_text()
  lines = text.splitlines()
  assert "is a JAX library" in "\n".join(lines[:3])
  head = "\n".join(lines[:40])
  assert "python3 dev.py main" in head and "python3 dev.py test" in head
  assert "lookahead_minmax(optax.adam(" in head and "# prints: " in head
  assert len(lines) <= 240, f"README.md has {len(lines)} lines: move sections to docs/"
  assert "DESIGN.md" not in text and "STYLE.md" not in text
  for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
    if not target.startswith(("http://", "https://")):
      assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_readme_quickstart_prints_what_it_says():
  import contextlib
  import io

  code = _python_blocks()[0]
  printed = re.search(r"^# prints: (.*?)\s{2,}\(", code, re.M).group(1)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(code, "README.md", "exec"), {})
  assert out.getvalue().strip() == printed


def test_bilinear_main_job_smoke(tmp_path):
  from experiments.bilinear import train
  from experiments.bilinear.configs import smoke

  result = train.train(smoke.get_config(), str(tmp_path))
  rows = {r["method"]: r for r in result["results"]}
  assert (tmp_path / "distance.png").stat().st_size > 10_000
  assert json.loads((tmp_path / "results.json").read_text())["results"]
  assert rows["gda"]["final_distance_mean"] > rows["gda"]["start_distance"]
  assert rows["la_gda"]["final_distance_mean"] < rows["la_gda"]["start_distance"]
  assert rows["extragradient"]["passes_per_step"] == 2
  np.testing.assert_allclose(rows["gda"]["closed_form_rate_per_step"], np.sqrt(1 + 0.3**2))
