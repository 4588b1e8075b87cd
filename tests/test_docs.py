"""The documentation site (mkdocs.yml, docs/) builds in strict mode, so a broken link, a link to a
repository file that does not exist or an unresolved reference fails, and its API reference has
every public name: each module's ``__all__`` on its page, each subpackage a page of its own.

Skipped where mkdocs is not installed (``pip install -e ".[docs]"``); ``MINMAXLAB_MKDOCS=<an mkdocs
executable>`` builds with another environment's (the reference is read from the source files, so
that environment needs no JAX)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import minmaxlab
from tests import _procs

ROOT = Path(__file__).resolve().parents[1]

# public module -> its page under docs/api/ (nav in mkdocs.yml)
PAGES = {
  "minmaxlab": "minmaxlab",
  "minmaxlab.games": "games",
  "minmaxlab.transforms": "transforms",
  "minmaxlab.analysis": "analysis",
  "minmaxlab.gan": "gan",
  "minmaxlab.gan.models": "gan.models",
  "minmaxlab.gan.losses": "gan.losses",
  "minmaxlab.gan.data": "gan.data",
  "minmaxlab.gan.metrics": "gan.metrics",
  "minmaxlab.coevolution": "coevolution",
  "minmaxlab.distributed": "distributed",
  "minmaxlab.pbt": "pbt",
  "minmaxlab.runner": "runner",
}


def _mkdocs() -> list[str]:
  exe = os.environ.get("MINMAXLAB_MKDOCS")
  if exe:
    return [exe]
  for name in ("mkdocs", "mkdocstrings_handlers.python", "material", "mkdocs_jupyter"):
    if importlib.util.find_spec(name) is None:
      pytest.skip(f"{name} is not installed (pip install -e '.[docs]')")
  return [sys.executable, "-m", "mkdocs"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
  out = tmp_path_factory.mktemp("site")
  cmd = [*_mkdocs(), "build", "--strict", "--site-dir", str(out)]
  env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
  result = _procs.run(cmd, timeout=600, env=env)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
  return out


def test_strict_build(site):
  assert (site / "index.html").is_file()
  pages = ("running", "game-optimizers", "step-sizes", "coevolution", "benchmarks", "reliability")
  for page in (*pages, "api/pbt"):
    assert (site / page / "index.html").is_file(), page


def test_notebooks_are_pages_with_their_figures(site):
  """Each notebook is a page of the site with its stored outputs (mkdocs-jupyter, not executed):
  its figures are in the HTML, and the analysis guide links to the pages."""
  for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    html = (site / "notebooks" / nb.stem / "index.html").read_text()
    assert html.count("data:image/png;base64") >= 2, nb.name
  analysis = (site / "analysis" / "index.html").read_text()
  assert 'href="../notebooks/gan_jacobian/"' in analysis


def test_every_public_module_has_a_page():
  names = {"minmaxlab"}
  for package in (minmaxlab, importlib.import_module("minmaxlab.gan")):
    names |= {
      f"{package.__name__}.{m.name}"
      for m in pkgutil.iter_modules(package.__path__)
      if not m.name.startswith("_")
    }
  assert names == set(PAGES)
  for page in PAGES.values():
    assert (ROOT / "docs" / "api" / f"{page}.md").is_file(), page


@pytest.mark.parametrize("module", sorted(PAGES))
def test_api_page_documents_every_public_name(site, module):
  mod = importlib.import_module(module)
  html = (site / "api" / PAGES[module] / "index.html").read_text()
  ids = set(re.findall(r'id="([\w.]+)"', html))
  missing = []
  for name in mod.__all__:
    if inspect.ismodule(getattr(mod, name)):
      if f"{module}.{name}" not in PAGES:  # a subpackage: its own page
        missing.append(name)
    elif f"{module}.{name}" not in ids:
      missing.append(name)
  assert not missing, f"docs/api/{PAGES[module]}.md lacks {missing}"


def test_docstrings_rst_becomes_markdown():
  if importlib.util.find_spec("griffe") is None:
    pytest.skip("griffe is not installed (pip install -e '.[docs]')")
  spec = importlib.util.spec_from_file_location("_griffe_roles", ROOT / "docs" / "_griffe_roles.py")
  rst = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(rst)
  text = "see :func:`~minmaxlab.game_step` and :class:`Players`, :py:meth:`a.b`, :math:`x_t`"
  assert rst.to_markdown(text) == "see `game_step` and `Players`, `a.b`, $x_t$"
  text = "A map::\n\n    y = f(x)\n      z = 1\n\nText.\n\n.. math::\n\n  a^2\n\n.. math:: b,\nend"
  assert rst.to_markdown(text).split("\n") == [
    *["A map:", "", "```python", "y = f(x)", "  z = 1", "```", "", "Text.", ""],
    *["$$", "a^2", "$$", "", "$$", "b,", "$$", "end"],
  ]
  assert rst.to_markdown("Example:\n  >>> f()\n").startswith("Examples:\n  >>> f()")


# The guides' Python blocks (docs/game-optimizers.md's momentum example, docs/step-sizes.md's two)
# run and print what the pages show: tests/test_doc_snippets.py runs every block of README.md
# and docs/.


# a CPU model, a percentage, a size, a millisecond, a speed-up or a rate: measurements, which live
# in docs/benchmarks.md with their JSON, not in docstrings (those state contracts and maths)
_MEASUREMENT = re.compile(
  r"Xeon|EPYC|\bIntel\b|\bAMD\b|\d\s?%|\d\s?(?:[kMG]i?B|ms)\b|\d(?:\.\d+)?\s?x\s(?:faster|slower)"
  r"|\d\s?steps/s\b|GFLOP"
)


def test_docstrings_hold_no_measurements():
  import ast

  found = []
  for path in sorted((ROOT / "minmaxlab").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        doc = ast.get_docstring(node) or ""
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in _MEASUREMENT.finditer(doc)]
  assert not found, f"measurements in docstrings (move them to docs/benchmarks.md): {found}"


def test_site_loads_nothing_from_other_servers(site):
  """No CDN: no script, stylesheet or font from another server (MathJax is not loaded, the
  theme uses the system's fonts); notebook pages import mermaid only for a mermaid diagram,
  and they have none."""
  external = re.compile(r"""<(?:script|link)[^>]*(?:src|href)=["']https?://""")
  for page in site.rglob("*.html"):
    html = page.read_text()
    assert not external.search(html), page
    assert "fonts.googleapis" not in html and "unpkg.com" not in html, page
    assert 'class="jp-Mermaid' not in html, page  # the only use of its CDN import


def test_api_reference_opens_with_the_entry_points():
  """docs/api/minmaxlab.md: grouped by role, the game step first and the states last."""
  text = (ROOT / "docs" / "api" / "minmaxlab.md").read_text()
  heads = re.findall(r"^## (.+)$", text, re.M)
  assert heads[:3] == ["Game step", "Optimizers", "Wrappers"] and "Optimizer states" in heads
  directives = re.findall(r"^::: minmaxlab\.(\w+)$", text, re.M)
  assert directives[0] == "game_step" and len(directives) == len(set(directives))
  assert directives.index("lookahead_minmax") < directives.index("LookaheadMinmaxState")


def test_prose_of_the_docs_cites_no_issue_numbers():
  """Pages are for users: no issue numbers outside the blocks generated from the studies'
  JSON (<!-- results:... --> blocks)."""
  found = []
  for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
    prose = re.sub(
      r"<!-- results:(\S+) -->.*?<!-- /results:\1 -->", "", page.read_text(), flags=re.S
    )
    found += [f"{page.name}: {m.group(0)}" for m in re.finditer(r"\b[Ii]ssues? \d+|#\d+\b", prose)]
  assert not found, found


def test_links_outside_the_docs_without_a_repository_address(tmp_path):
  """mkdocs.yml has no repo_url: a link to a repository file becomes its path as text, an
  image is shown from a copy in the site."""
  import importlib.util as util
  from types import SimpleNamespace

  spec = util.spec_from_file_location("_hooks", ROOT / "docs" / "_hooks.py")
  if util.find_spec("mkdocs") is None:
    pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
  hooks = util.module_from_spec(spec)
  spec.loader.exec_module(hooks)
  page = SimpleNamespace(file=SimpleNamespace(src_uri="coevolution.md"))
  config = {"docs_dir": str(ROOT / "docs"), "repo_url": None}
  md = (
    "[`experiments/gan/README.md`](../experiments/gan/README.md), [the README](../README.md),\n"
    "![fig](../experiments/coevolution/figures/ring8_grid_vs_single_s0.png)"
  )
  out = hooks.on_page_markdown(md, page, config, None)
  assert out.splitlines() == [
    "`experiments/gan/README.md`, the README (`README.md`),",
    "![fig](experiments/coevolution/figures/ring8_grid_vs_single_s0.png)",
  ]
  assert "experiments/coevolution/figures/ring8_grid_vs_single_s0.png" in hooks._outside_images(
    ROOT / "docs", ROOT
  )
