"""The whole study record (``experiments.study_record``, issue 46): docs/results.md lists every
version of every study, marks the superseded ones with the reason from the committed table,
and says in words where two versions of a study disagree."""

from __future__ import annotations

from pathlib import Path

from experiments import _report, study_record

_report._load_all()
REPO = Path(_report.REPO)


def test_every_protocol_is_a_listed_version_with_its_block():
  listed = {v.protocol for s in study_record.STUDIES for v in s.versions if v.protocol}
  protocols = {p.relative_to(REPO).as_posix() for p in REPO.glob("experiments/*/protocols/*.json")}
  assert protocols == listed
  for study in study_record.STUDIES:
    assert (REPO / study.readme).is_file()
    for v in study.versions:
      assert v.block is None or _report.BLOCKS[v.block][0] == study.readme, (study.title, v)
  for title, version in study_record.SUPERSEDED:
    assert any(
      s.title == title and version in [v.name for v in s.versions] for s in (study_record.STUDIES)
    ), (title, version)


def test_the_summary_shows_every_version_and_marks_the_superseded():
  text = _report.read_block(REPO / study_record.DOC, "summary")
  for study in study_record.STUDIES:
    assert f"### {study.title}" in text
    section = text.split(f"### {study.title}")[1].split("### ")[0]
    for v in study.versions:
      assert f"- **{v.name}**" in section, (study.title, v.name)
      if (study.title, v.name) in study_record.SUPERSEDED:
        by, why = study_record.SUPERSEDED[(study.title, v.name)]
        assert f"superseded by {by}: {why}" in section
  # Lipizzaner grids: v1 found no difference (2x2 worse), v2 found the 2x2 better
  lip = text.split("### Lipizzaner grids")[1].split("### ")[0]
  assert "**The versions disagree** on 2x2 grid vs 1x1 grid: v1 found" in lip
  assert "typed `registered` 2026-12-04T17:30Z disagrees" in text  # PBT v1's typed time


def test_disagreement_needs_different_verdicts_on_a_shared_comparison():
  study = next(s for s in study_record.STUDIES if s.title == "Lipizzaner grids")
  same = {
    "v2": ["- 2x2 grid beats 1x1 grid on class TVD: 0.1 vs 0.2."],
    "v1": ["- 2x2 grid beats 1x1 grid on class TVD: 0.1 vs 0.3."],
  }
  assert study_record.disagreements(study, same) == []
  flipped = dict(same, v1=["- 1x1 grid beats 2x2 grid on class TVD: 0.1 vs 0.3."])
  (line,) = study_record.disagreements(study, flipped)
  assert "v1 found \u201c1x1 grid beats 2x2 grid" in line and "v2 found \u201c2x2 grid" in line
  untested = dict(same, v1=["- 2x2 grid vs 1x1 grid: not tested, an arm did not run."])
  assert study_record.disagreements(study, untested) == []


def test_verdict_bullets_of_a_block_without_a_heading():
  block = "| t |\n\n- A beats B.\n- Parity: not shown.\n- Secondary, x: y.\n\n**Registered"
  assert study_record.verdict_bullets(block) == ["- A beats B.", "- Parity: not shown."]
