"""The whole study record: every version of every study, with its verdict, in ``docs/results.md``.

:data:`STUDIES` is the committed table of the studies and their versions: each version's
protocol (none for an exploratory version 0), its README block, and, for a version that a
later one replaces, what replaced it and why (:data:`SUPERSEDED`). :func:`summary` generates
the block ``summary`` of ``docs/results.md`` from that table, the protocols, git (each
protocol's registration time: ``experiments.registration.registered``) and the generated
blocks' verdicts: every version is listed, the superseded ones marked as such with the
reason, and where two registered versions of a study reach different verdicts on the same
comparison a sentence says so and quotes both.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from experiments import _report

REPO = Path(_report.REPO)
DOC = "docs/results.md"


class Version(NamedTuple):
  name: str  # "v0", "v1", ...
  protocol: str | None  # relative to the repository; None: exploratory, not pre-registered
  block: str | None  # its generated block (None: nothing of it is reported)


class Study(NamedTuple):
  title: str
  readme: str
  versions: tuple[Version, ...]


_GAN, _COEV = "experiments/gan", "experiments/coevolution"
STUDIES = (
  Study(
    "Lookahead-minmax vs its base method",
    f"{_GAN}/README.md",
    (
      Version("v4", f"{_GAN}/protocols/lookahead.v4.json", "lookahead_v4"),
      Version("v3", f"{_GAN}/protocols/lookahead.v3.json", "lookahead_v3"),
      Version("v2", f"{_GAN}/protocols/lookahead.v2.json", "lookahead_v2"),
      Version("v1", f"{_GAN}/protocols/lookahead.v1.json", None),
      Version("v0", None, "lookahead_v0_20k"),
    ),
  ),
  Study(
    "Lookahead-minmax outcome parity: the library vs the MNIST notebook's own code",
    "docs/parity.md",
    (
      Version(
        "v2", "experiments/parity/protocols/lagan_outcome.v2.json", "parity_lagan_outcome_v2"
      ),
      Version("v1", "experiments/parity/protocols/lagan_outcome.v1.json", "parity_lagan_outcome"),
    ),
  ),
  Study(
    "Lipizzaner grids",
    f"{_COEV}/README.md",
    (
      Version("v2", f"{_COEV}/protocols/lipizzaner_grids.v2.json", "lipizzaner_grids_v2"),
      Version("v1", f"{_COEV}/protocols/lipizzaner_grids.v1.json", "lipizzaner_grids_v1"),
      Version("v0", None, "lipizzaner_grids_v0"),
    ),
  ),
  Study(
    "The 8-Gaussian ring",
    f"{_COEV}/README.md",
    (
      Version("v3", f"{_COEV}/protocols/ring.v3.json", "ring_v3"),
      Version("v2", f"{_COEV}/protocols/ring.v2.json", "ring_v2"),
      Version("v1", f"{_COEV}/protocols/ring.v1.json", "ring_v1"),
      Version("v0", None, "ring_issue18_main"),
    ),
  ),
  Study(
    "Lipizzaner outcome parity: the reference's own code vs the library on the ring",
    "docs/parity.md",
    (
      Version(
        "v4",
        "experiments/parity/protocols/lipizzaner_ring_outcome.v4.json",
        "lipizzaner_ring_outcome_v4",
      ),
      Version(
        "v3",
        "experiments/parity/protocols/lipizzaner_ring_outcome.v3.json",
        "lipizzaner_ring_outcome_v3",
      ),
      Version(
        "v2",
        "experiments/parity/protocols/lipizzaner_ring_outcome.v2.json",
        "lipizzaner_ring_outcome",
      ),
    ),
  ),
  Study(
    "Lipizzaner outcome parity: the reference's own code vs the library on Fashion-MNIST 2x2",
    "docs/parity.md",
    (
      Version(
        "v1",
        "experiments/parity/protocols/lipizzaner_fmnist_outcome.v1.json",
        "lipizzaner_fmnist_outcome",
      ),
    ),
  ),
  Study(
    "PBT vs random search",
    "experiments/pbt/README.md",
    (
      Version("v1", "experiments/pbt/protocols/pbt_vs_rs.v1.json", "pbt_vs_rs_v1"),
      Version("v0", None, "pbt_vs_rs_v0"),
    ),
  ),
  Study(
    "Game dynamics while training (AltGAN vs LA-AltGAN)",
    f"{_GAN}/README.md",
    (
      Version("v2", f"{_GAN}/protocols/dynamics.v2.json", "dynamics_v2"),
      Version("v1", f"{_GAN}/protocols/dynamics.v1.json", None),
    ),
  ),
  Study(
    "bfloat16 matmuls: quality parity (a benchmark option)",
    "docs/benchmarks.md",
    (
      Version("v2", "experiments/benchmarks/protocols/bf16_parity.v2.json", "bf16_parity_v2"),
      Version("v1", "experiments/benchmarks/protocols/bf16_parity.v1.json", "bf16_parity"),
    ),
  ),
)

# (study title, version) -> (the version that replaces it, why). A version not here is current.
_NOTEBOOK_OPS = (
  "the notebook's own networks (make_pair('dcgan_notebook'), commit 8a4e834) and its fresh latent "
  "batch per player's field (latent_draws='per_player', commit 8624a76), found by the parity work "
  "after its registration"
)
SUPERSEDED = {
  ("Lookahead-minmax vs its base method", "v3"): (
    "v4",
    "it trained the library's DCGAN pair (1-3-7-14-28, biases, the library's initialisation) "
    f"with one latent batch for both players' fields; v4 is the same study on {_NOTEBOOK_OPS}. "
    "Its one start reached no evaluation: nothing of it is reported",
  ),
  ("Lookahead-minmax outcome parity: the library vs the MNIST notebook's own code", "v1"): (
    "v2",
    "its library side trained the library's DCGAN pair with one latent batch for both "
    "players' fields while the reference side runs the notebook's; v2 runs the library side "
    f"on {_NOTEBOOK_OPS} (margin, test, seeds and horizon unchanged). No run of it finished",
  ),
  ("Lipizzaner outcome parity: the reference's own code vs the library on the ring", "v3"): (
    "v4",
    "its library arms' mixture ES fitted the weights to the neighbours' generators of the "
    "generation's start, while the reference's ES reads them after their training; v4 runs "
    "them anew, on new seeds, with mixture_generators 'trained' and reuses v2's reference runs",
  ),
  ("Lipizzaner outcome parity: the reference's own code vs the library on the ring", "v2"): (
    "v3",
    "its library arms started their networks from the library's default initialisation while "
    "the reference's start from PyTorch's nn.Linear default; v3 runs them anew, on new seeds, "
    "with initializer 'torch' and reuses v2's reference runs",
  ),
  ("Lookahead-minmax vs its base method", "v1"): (
    "v2",
    "its runs on one H200 stopped when the session's device time ran out, every arm between "
    "steps 8000 and 12000; no run reached the endpoint and nothing of it is reported",
  ),
  ("Lookahead-minmax vs its base method", "v0"): (
    "v1",
    "exploratory: 5 seeds, extended step by step with a verdict read at each endpoint, no test",
  ),
  ("Lipizzaner grids", "v1"): (
    "v2",
    "it ran on one H200, scored by that host's classifier, and its plain-GAN arm did not run "
    "before the device time ran out; v2 reran every arm on the CPU with one classifier",
  ),
  ("Lipizzaner grids", "v0"): (
    "v1",
    "exploratory: 3-4 seeds per grid, other operators, two hosts and two classifiers, no test",
  ),
  ("The 8-Gaussian ring", "v0"): (
    "v1",
    "exploratory: 1-5 seeds per variant, the lone GAN a 1x1 grid, no test",
  ),
  ("PBT vs random search", "v0"): (
    "v1",
    "exploratory: 3 seeds, a smaller search, the selection-time FID (biased low), no test",
  ),
  ("Game dynamics while training (AltGAN vs LA-AltGAN)", "v1"): (
    "v2",
    "its 10000-step runs could not finish on the loaded host by the session's deadline (no "
    "evaluation was looked at); v2 is the same study at 3000 steps",
  ),
  ("bfloat16 matmuls: quality parity (a benchmark option)", "v1"): (
    "v2",
    "parity was not shown at n = 4/4 (the interval wider than the margin); v2 runs 8 new "
    "seeds, analysed alone",
  ),
}


_RING_WHY = (
  "that arm ran Lookahead-minmax (k 5, alpha 0.5) over Adam with simultaneous "
  "updates, not the reference's operators (plain Adam per individual, the generator first "
  "against one random neighbourhood discriminator, then the discriminator against one random "
  "neighbourhood generator); v3's `reference_whole` runs those"
)
# (study title, version) -> (the version that replaces one of its arms, the arm's key,
# its name in the verdicts, why): the version stays current for its other arms, and its
# verdicts that name that arm are marked.
ARM_SUPERSEDED = {
  ("The 8-Gaussian ring", "v2"): (
    "v3",
    "reference_as_run",
    "reference coupling, lr mutation as run",
    _RING_WHY,
  ),
  ("The 8-Gaussian ring", "v1"): ("v3", "reference", "reference coupling", _RING_WHY),
}


def _mark(bullets: list[str], key: str, name: str, by: str) -> list[str]:
  """``bullets`` with each verdict that names the arm ``name`` marked superseded by ``by``."""
  import re

  named = re.compile(rf"{re.escape(name)}(?!\w)")
  return [
    f"- *superseded by {by} (arm `{key}`)*: {b[2:]}"
    if b.startswith("- ") and named.search(b)
    else b
    for b in bullets
  ]


def _link(path: str) -> str:
  """A link from ``docs/results.md`` to the repository file ``path``."""
  return f"[`{path}`]({path[5:] if path.startswith('docs/') else '../' + path})"


def _labels(protocol_file: str) -> dict:
  p = _report.load_protocol(REPO / protocol_file)
  return {a: spec.get("label", a) for a, spec in p["arms"].items()}


def verdict_bullets(block: str) -> list[str]:
  """The registered verdicts of a generated block (``_report.verdict_lines``), or, for a
  block without a **Primary**/**Verdict** heading, its bullets before the first secondary."""
  found = _report.verdict_lines(block)
  if any(line.startswith("- ") for line in found):
    return found
  out = []
  for line in block.splitlines():
    if line.startswith("- Secondary") or line.startswith("**Registered endpoints**"):
      break
    if line.startswith("- ") or line.startswith("**Incomplete"):
      out.append(line)
  return out


def _outcome(line: str) -> str:
  if " beats " in line:
    return "beats: " + line[2:].split(" beats ", 1)[0]
  if "not tested" in line:
    return "not tested"
  return "no difference"


def disagreements(study: Study, verdicts: dict) -> list[str]:
  """Sentences for the registered comparisons on which two versions of ``study`` reach
  different verdicts (a difference in one, none or the other winner in the other), each
  quoting both versions' verdicts. ``verdicts``: version name -> its verdict bullets."""
  out = []
  registered = [v for v in study.versions if v.protocol and verdicts.get(v.name)]
  for i, new in enumerate(registered):
    for old in registered[i + 1 :]:
      pn = _report.load_protocol(REPO / new.protocol)
      po = _report.load_protocol(REPO / old.protocol)
      shared = [c for c in pn["primary"]["comparisons"] if c in po["primary"]["comparisons"]]
      for a, b in shared:
        la, lb = _labels(new.protocol)[a], _labels(new.protocol)[b]
        # the verdict bullets that name both arms (an **Incomplete:** line is no verdict)
        pick = lambda lines: [x for x in lines if x.startswith("- ") and la in x and lb in x]  # noqa: E731
        for ln, lo in zip(pick(verdicts[new.name]), pick(verdicts[old.name])):
          if _outcome(ln) != _outcome(lo) and "not tested" not in (_outcome(ln), _outcome(lo)):
            out.append(
              f"**The versions disagree** on {la} vs {lb}: {old.name} found "
              f"\u201c{lo[2:].rstrip('.')}\u201d; {new.name} found "
              f"\u201c{ln[2:].rstrip('.')}\u201d."
            )
  return out


def _version_lines(study: Study, v: Version) -> tuple[list[str], list[str]]:
  """The lines of one version and its verdict bullets."""
  from experiments import registration

  status = "current"
  if (study.title, v.name) in SUPERSEDED:
    by, why = SUPERSEDED[(study.title, v.name)]
    status = f"superseded by {by}: {why}"
  elif (study.title, v.name) in ARM_SUPERSEDED:
    by, key, _, why = ARM_SUPERSEDED[(study.title, v.name)]
    status = f"current, except its arm `{key}`: superseded by {by} for that arm, as {why}"
  where = f"block `{v.block}`" if v.block else "no block: nothing of it is reported"
  if v.protocol is None:
    head = f"- **{v.name}**, not pre-registered ({status}; {where})"
    return [head + ": no test, no verdict."], []
  typed = _report.load_protocol(REPO / v.protocol).get("registered")
  when = registration.registered(REPO / v.protocol, typed)
  head = f"- **{v.name}** ({status}; protocol {_link(v.protocol)}, registered {when}; {where})"
  if not v.block:
    return [head + ": no verdict."], []
  bullets = verdict_bullets(_report.make(v.block))
  if not bullets:
    return [head + ": no registered verdict yet."], []
  shown = bullets
  if (study.title, v.name) in ARM_SUPERSEDED:
    by, key, name, _ = ARM_SUPERSEDED[(study.title, v.name)]
    shown = _mark(bullets, key, name, by)
  return [head + ":", *[f"  {b if b.startswith('- ') else '- ' + b}" for b in shown]], bullets


def summary() -> str:
  """The block ``summary`` of ``docs/results.md``: every version of every study, newest
  first, with its status, registration time (git) and registered verdicts."""
  parts = []
  for study in STUDIES:
    parts.append(f"### {study.title}")
    parts += ["", f"README: {_link(study.readme)}.", ""]
    verdicts = {}
    for v in study.versions:
      lines, verdicts[v.name] = _version_lines(study, v)
      parts += lines
    found = disagreements(study, verdicts)
    parts += ["", *found] if found else []
    parts.append("")
  return "\n".join(parts)


_report.register("summary", DOC, f"{__name__}:summary")
