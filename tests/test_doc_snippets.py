"""Every ```python block of README.md and docs/*.md runs as copied, and prints what it shows.

A block runs alone in a fresh namespace (in a scratch working directory), unless the HTML
comment on the line above it says otherwise:

- ``<!-- snippet: name=NAME -->`` names it;
- ``<!-- snippet: continues=NAME -->`` runs it after the block named ``NAME`` of the same page,
  in the namespace that block left (both keys may be given: ``name=b continues=a``);
- ``<!-- snippet: run-by=tests/PATH.py -->``: it needs files a test makes (a finished run);
  that test runs it, and must name the page.

Its output is compared when the page shows it: with ``# prints: TEXT`` lines in the block (one
per printed line; two spaces and a parenthesised remark after ``TEXT`` are not part of it), or
with a plain ``` block right after it (the whole output)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]

_BLOCK = re.compile(
  r"(?:<!--\s*snippet:(?P<marker>[^>]*?)-->\n)?```python\n(?P<code>.*?)```\n"
  r"(?:\n```\n(?P<output>.*?)```\n)?",
  re.S,
)
_PRINTS = re.compile(r"^\s*# prints: (.*?)(?:\s{2,}\(.*\))?\s*$", re.M)
_KEYS = ("name", "continues", "run-by")


class Snippet:
  """One ```python block of a page: its code, its marker's keys and the output it shows."""

  def __init__(self, page: str, index: int, code: str, marker: str, output: str | None):
    self.page, self.index, self.code = page, index, code
    self.keys = {}
    for item in marker.split():
      key, sep, value = item.partition("=")
      if key not in _KEYS or not sep or not value:
        raise AssertionError(f"{self}: bad snippet marker {item!r} (keys: {', '.join(_KEYS)})")
      self.keys[key] = value
    shown = _PRINTS.findall(code)
    if shown and output is not None:
      raise AssertionError(f"{self}: shows its output twice (# prints: and a block after it)")
    self.expected = output if output is not None else "".join(f"{s}\n" for s in shown) or None

  def __repr__(self) -> str:
    return f"{self.page} block {self.index + 1}"


def snippets(text: str, page: str) -> list[Snippet]:
  """The ```python blocks of the Markdown ``text`` (``page`` names it in messages)."""
  found = [
    Snippet(page, i, m.group("code"), m.group("marker") or "", m.group("output"))
    for i, m in enumerate(_BLOCK.finditer(text))
  ]
  assert len(found) == text.count("```python\n"), f"{page}: a ```python block was not parsed"
  return found


def _printed_lines(text: str) -> str:
  return "".join(line.rstrip() + "\n" for line in text.splitlines())


def run_snippet(snippet: Snippet, page_snippets: list[Snippet], cwd: Path) -> dict:
  """Run ``snippet`` (after the blocks it continues) in ``cwd``; check the output it shows.
  Returns the namespace it leaves."""
  scope: dict = {"__name__": "__snippet__"}
  if "continues" in snippet.keys:
    named = [s for s in page_snippets if s.keys.get("name") == snippet.keys["continues"]]
    if len(named) != 1:
      raise AssertionError(
        f"{snippet}: continues {snippet.keys['continues']!r}, named {len(named)}x"
      )
    scope = dict(run_snippet(named[0], page_snippets, cwd))
  out = io.StringIO()
  here = os.getcwd()
  os.chdir(cwd)
  try:
    with contextlib.redirect_stdout(out):
      exec(compile(snippet.code, str(snippet), "exec"), scope)
  finally:
    os.chdir(here)
  if snippet.expected is not None and _printed_lines(out.getvalue()) != snippet.expected:
    raise AssertionError(f"{snippet} printed\n{out.getvalue()}\nbut shows\n{snippet.expected}")
  return scope


def _cases():
  for page in PAGES:
    for s in snippets((ROOT / page).read_text(), page):
      yield pytest.param(page, s.index, id=f"{page}:{s.index + 1}")


@pytest.mark.parametrize("page, index", list(_cases()))
def test_snippet_runs_as_copied(page, index, tmp_path):
  page_snippets = snippets((ROOT / page).read_text(), page)
  snippet = page_snippets[index]
  if "run-by" in snippet.keys:
    test = ROOT / snippet.keys["run-by"]
    assert test.is_file() and page in test.read_text(), f"{snippet}: {test} does not run it"
    return
  run_snippet(snippet, page_snippets, tmp_path)


_PAGE = """Some text.

<!-- snippet: name=setup -->
```python
x = 2
print(x + 1)
# prints: 3   (a remark)
```

<!-- snippet: continues=setup -->
```python
print(x * 10)
```

```
20
```
"""


def _run_all(text: str, tmp_path: Path) -> None:
  page = snippets(text, "page.md")
  for s in page:
    run_snippet(s, page, tmp_path)


def test_the_checker_passes_a_good_page_and_fails_perturbed_ones(tmp_path):
  _run_all(_PAGE, tmp_path)
  perturbed = {
    "printed output": _PAGE.replace("# prints: 3", "# prints: 4"),
    "shown block": _PAGE.replace("```\n20\n```", "```\n21\n```"),
    "an undefined name": _PAGE.replace("print(x * 10)", "print(y * 10)"),
    "no continuation marker": _PAGE.replace("<!-- snippet: continues=setup -->\n", ""),
    "a continuation of nothing": _PAGE.replace("continues=setup", "continues=other"),
    "a typo in the marker": _PAGE.replace("continues=setup", "continue=setup"),
  }
  for what, text in perturbed.items():
    with pytest.raises((AssertionError, NameError)):
      _run_all(text, tmp_path)
      pytest.fail(f"the checker passed a page with {what}")


def test_every_page_with_python_blocks_is_checked():
  assert "README.md" in PAGES and "docs/game-optimizers.md" in PAGES
  total = sum(len(snippets((ROOT / p).read_text(), p)) for p in PAGES)
  assert total >= 10
