"""Every results table of every README is generated from the committed JSON: each block
registered with ``experiments._report`` is regenerated here and must equal the README's
text between its markers (issue 34: no result number is typed by hand)."""

import json
import re
from pathlib import Path

import pytest

from experiments import _report

_report._load_all()
BLOCKS = sorted(_report.BLOCKS)
REPO = Path(_report.REPO)


def test_every_study_registers_its_blocks():
  assert _report.STUDY_MODULES and len(BLOCKS) >= len(_report.STUDY_MODULES)
  for name, (readme, maker) in _report.BLOCKS.items():
    assert (REPO / readme).is_file(), (name, readme)
    assert ":" in maker, (name, maker)


@pytest.mark.parametrize("name", BLOCKS)
def test_readme_block_equals_its_regeneration(name):
  readme, _ = _report.BLOCKS[name]
  made = _report.make(name)
  assert made.strip(), f"block {name} generated nothing"
  assert _report.read_block(REPO / readme, name) == made, (
    f"{readme} block {name} differs from its JSON: run `python -m experiments._report`"
  )


def test_every_marker_in_a_readme_is_registered():
  """A block in a README or a page of docs/ that nothing generates would be typed by hand."""
  import re

  pages = [REPO / "README.md", *REPO.glob("experiments/*/README.md"), *REPO.glob("docs/*.md")]
  for readme in pages:
    for name in re.findall(r"<!-- results:([\w-]+) -->", readme.read_text()):
      assert name in _report.BLOCKS, f"{readme.name}: block {name} is not registered"


def test_write_block_replaces_only_its_block(tmp_path):
  readme = tmp_path / "README.md"
  readme.write_text("a\n<!-- results:x -->\nold\n<!-- /results:x -->\nb 1.0\n")
  assert _report.write_block(readme, "x", "new | 2.5\n")
  assert readme.read_text() == "a\n<!-- results:x -->\nnew | 2.5\n<!-- /results:x -->\nb 1.0\n"
  assert not _report.write_block(readme, "x", "new | 2.5")  # unchanged: not rewritten
  assert _report.read_block(readme, "x") == "new | 2.5"
  with pytest.raises(ValueError, match="no block"):
    _report.write_block(readme, "y", "z")


def test_protocols_load_and_name_their_arms(tmp_path):
  paths = sorted(REPO.glob("experiments/*/protocols/*.json"))
  assert len(paths) >= 4
  for path in paths:
    p = _report.load_protocol(path)
    assert p["seeds"] and p["primary"]["alpha"] == 0.05, path
  bad = json.loads(paths[0].read_text())
  bad["primary"]["comparisons"] = [["nope", next(iter(bad["arms"]))]]
  (tmp_path / "p.json").write_text(json.dumps(bad))
  with pytest.raises(ValueError, match="nope"):
    _report.load_protocol(tmp_path / "p.json")
  del bad["endpoint"]
  (tmp_path / "p.json").write_text(json.dumps(bad))
  with pytest.raises(ValueError, match="endpoint"):
    _report.load_protocol(tmp_path / "p.json")


def test_one_scorer_refuses_mixed_classifiers():
  a = {"seed": 0, "classifier": {"params_digest": "aaaa"}}
  b = {"seed": 1, "classifier": {"params_digest": "bbbb"}}
  assert _report.one_scorer([a, dict(a, seed=2)]) == a["classifier"]
  with pytest.raises(ValueError, match="2 classifiers"):
    _report.one_scorer([a, b])
  with pytest.raises(ValueError, match="2 classifiers"):
    _report.one_scorer([a, {"seed": 3, "classifier": None}])


def test_family_applies_holm_and_says_no_difference():
  groups = {"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [6.0, 7.0, 8.0, 9.0, 10.0], "c": [2, 3, 4, 5, 6]}
  lines = _report.family(
    groups,
    [("a", "b"), ("a", "c")],
    {"a": "A", "b": "B"},
    test="mann_whitney",
    alpha=0.05,
    lower_is_better=True,
    metric="FID",
  )
  # a vs b completely separated: exact p = 2/252 = 0.0079, Holm x2 = 0.016 < 0.05
  assert lines[0].startswith("- A beats B on FID") and "0.016 Holm-adjusted over 2" in lines[0]
  assert "0.0079 raw" in lines[0]
  assert lines[1].startswith("- No difference detected at n = 5/5: A 3.0 vs c 4.0")


def test_verdict_lines_of_each_block_style():
  listed = (
    "**Incomplete:** x (3) of 6.\n\n| a |\n\n**Primary** (Holm):\n- A beats B.\n- No.\n\nrest\n- c"
  )
  assert _report.verdict_lines(listed) == ["**Incomplete:** x (3) of 6.", "- A beats B.", "- No."]
  one = "| t |\n\n**Verdict (primary, at the endpoint):** No difference detected at n = 10/10.\n"
  assert _report.verdict_lines(one) == ["- No difference detected at n = 10/10."]
  assert _report.verdict_lines("| only a table |") == []
  # every registered version of the summary in docs/results.md has its verdicts
  summary = _report.read_block(REPO / "docs/results.md", "summary")
  assert "no registered verdict yet" not in summary


def test_incomplete_note_names_the_short_arms():
  note = _report.incomplete_note({"a": [1, 2], "b": [1]}, {"a": "A", "b": "B"}, 2, " at gen 3")
  assert note[0].startswith("**Incomplete:** B (1) of 2 registered seeds at gen 3;")
  assert _report.incomplete_note({"a": [1, 2]}, {}, 2) == []


# A measured quantity typed into prose: durations and sizes with their unit, throughputs, speedups
# ("3.1x", "10x slower"), percentages (not a confidence level), p-values, decimals in scientific
# notation ("1.6e-05") and one measured decimal against another ("0.226 vs 0.199"). Not matched:
# versions, dates, configuration values (written in inline code, or without a unit: "lr 1e-3",
# "a 2x2 grid", "k = 5") and closed-form constants.
_MEASURED = re.compile(
  r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns|min|minutes|seconds|hours|h|GB|MB|KB|kB|MiB|GiB|KiB)\b"
  r"|\b\d+(?:\.\d+)?\s?(?:GFLOP|TFLOP)(?:/s)?(?![\w/])|\b\d+(?:\.\d+)?\s?CPU[- ]s(?:econds)?\b"
  r"|\b\d+\.\d+x\b|\b\d+x (?:slower|faster|more|less|fewer|larger|smaller)\b"
  r"|\b\d+(?:\.\d+)?%(?! (?:CI|interval|confidence))"
  r"|\bp\s?(?:=|<|>|≤|<=)\s?\d*\.\d+"
  r"|\b\d+\.\d+e[-+]?\d+\b"
  r"|\b\d+\.\d+ vs\.? \d+\.\d+\b"
)


def measured_numbers_outside_blocks(text: str) -> list[str]:
  """The measured quantities of ``text`` outside its generated blocks, code and inline code."""
  text = re.sub(r"<!-- results:([\w-]+) -->.*?<!-- /results:\1 -->", "", text, flags=re.S)
  text = re.sub(r"```.*?```", "", text, flags=re.S)
  text = re.sub(r"`[^`]*`", "", text)
  return [m.group(0) for m in _MEASURED.finditer(text)]


# README.md, every page of docs/ and every experiment's README
PAGES = sorted(
  p.relative_to(REPO).as_posix()
  for p in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("experiments/*/README.md")]
)


def test_the_checked_pages_are_every_readme_and_docs_page():
  for page in ("README.md", "docs/benchmarks.md", "docs/index.md", "experiments/gan/README.md"):
    assert page in PAGES
  assert len([p for p in PAGES if p.startswith("docs/")]) >= 10


@pytest.mark.parametrize("page", PAGES)
def test_no_measured_number_outside_a_generated_block(page):
  """Issue 46: a measured number on these pages is generated from committed JSON (a
  ``<!-- results:NAME -->`` block), shown as the output of an executed example, or absent."""
  assert measured_numbers_outside_blocks((REPO / page).read_text()) == [], page


def test_the_measured_number_check_finds_typed_numbers():
  text = "took 16.9 s, 0.86 GB, 4.3x faster, 99% of it; 95% CI; `3 s`\n<!-- results:x -->\n2 s\n"
  text += "<!-- /results:x -->\n```\n5 s\n```\n"
  assert measured_numbers_outside_blocks(text) == ["16.9 s", "0.86 GB", "4.3x", "99%"]


def test_the_measured_number_check_finds_the_wider_forms():
  found = measured_numbers_outside_blocks(
    "p = 0.004 and p<0.05; off by 1.6e-05; 3.1x; 10x slower; 0.226 vs 0.199; 153.8 GFLOP/s;"
    " 20 CPU-s; 3.61 GiB; 14 ms"
  )
  assert found == [
    "p = 0.004",
    "p<0.05",
    "1.6e-05",
    "3.1x",
    "10x slower",
    "0.226 vs 0.199",
    "153.8 GFLOP/s",
    "20 CPU-s",
    "3.61 GiB",
    "14 ms",
  ]


def test_the_measured_number_check_passes_configuration_values():
  text = (
    "JAX 0.10.2, Python >= 3.11, torch 2.14.1 on 2026-12-04 12:26 UTC; Adam lr 1e-3, 2e-4 and"
    " beta 0.9999; a 2x2 grid, 4x4 blocks, 32x32 DCGAN cells; k = 5, alpha = 0.5, alpha 0.05;"
    " 600 batches of 100; a 5x target; the 95% interval; `orphan_s=30`; `timeout 450 s`"
  )
  assert measured_numbers_outside_blocks(text) == []
