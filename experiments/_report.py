"""Pre-registered protocols and README tables generated from committed JSON.

Every results study of ``experiments/`` follows one discipline:

1. **A protocol file, committed before its runs**,
   ``experiments/<area>/protocols/<study>.v<N>.json``, names the arms, seeds, endpoint,
   primary metric and evaluation point, the test, its alternative and alpha, the
   correction for a family of comparisons and the evaluation classifier's settings.
   :func:`load_protocol` reads it and checks its fields. The study's command reads its
   arms and seeds from it, so the runs cannot drift from what was registered. Extending
   a study is a new version; the README keeps both. The study commands enforce it
   (``experiments.registration``): a study starts only from a committed, unchanged protocol
   and committed code, its registration time is the protocol's first commit, and its JSON
   keeps the protocol's git blob and the commits it ran at.
2. **Results are JSON**: every seed of every arm, with the digest of the classifier that
   scored it. :func:`one_scorer` refuses a study that mixes classifiers.
3. **Tables are generated**: a study's ``table`` function turns its JSON (and protocol) into
   markdown with the verdict (``experiments.stats.compare`` / ``verdict``: effect, confidence
   interval, p-value, n per arm). :func:`write_block` puts it into a README between
   ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``; :data:`BLOCKS` lists every block
   of every README and the function that makes it, and
   ``tests/experiments/test_generated_tables.py`` regenerates each one from the committed JSON
   and fails on any difference. No result number in a README is typed by hand.

``python -m experiments._report`` rewrites every block from the committed JSON.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROTOCOL_FIELDS = (
  "study",
  "version",
  "question",
  "arms",
  "seeds",
  "endpoint",
  "primary",
)
PRIMARY_FIELDS = ("metric", "comparisons", "test", "alternative", "alpha")

# name -> (README path relative to the repository, "module:function" returning the markdown).
# Each function takes no argument and reads only committed files.
BLOCKS: dict[str, tuple[str, str]] = {}


def register(name: str, readme: str, maker: str) -> None:
  """Declare the generated block ``name`` of ``readme`` (made by ``maker``)."""
  BLOCKS[name] = (readme, maker)


@contextlib.contextmanager
def results_lock(path):
  """Hold an exclusive lock for the results file ``path`` while a study merges its runs
  into it: several processes may run different arms or seeds of one protocol."""
  import fcntl
  import hashlib
  import tempfile

  tag = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:12]
  with open(Path(tempfile.gettempdir()) / f"minmaxlab-results-{tag}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    yield


def load_protocol(path) -> dict:
  """The protocol file at ``path``, checked for the fields every protocol has."""
  path = Path(path)
  p = json.loads(path.read_text())
  missing = [k for k in PROTOCOL_FIELDS if k not in p]
  missing += [f"primary.{k}" for k in PRIMARY_FIELDS if k not in p.get("primary", {})]
  if missing:
    raise ValueError(f"protocol {path} lacks {', '.join(missing)}")
  arms = set(p["arms"])
  for a, b in p["primary"]["comparisons"]:
    if a not in arms or b not in arms:
      raise ValueError(f"protocol {path}: comparison {a} vs {b} names an arm not in arms")
  return p


def one_scorer(runs, describe=lambda r: str(r.get("seed"))) -> dict | None:
  """The one evaluation classifier (its ``params_digest`` record) that scored every run
  of ``runs`` (dicts with a ``classifier`` field); ``ValueError`` naming the runs when
  they were scored by more than one, or when some record none while others do."""
  digests: dict[str | None, list[str]] = {}
  first: dict[str | None, dict | None] = {}
  for r in runs:
    c = r.get("classifier")
    d = c.get("params_digest") if isinstance(c, dict) else None
    digests.setdefault(d, []).append(describe(r))
    first.setdefault(d, c)
  if len(digests) > 1:
    parts = "; ".join(f"{d}: {', '.join(v[:6])}" for d, v in digests.items())
    raise ValueError(f"runs scored by {len(digests)} classifiers ({parts}); rescore them")
  return next(iter(first.values()), None)


def _markers(name: str) -> tuple[str, str]:
  return f"<!-- results:{name} -->", f"<!-- /results:{name} -->"


def read_block(readme, name: str) -> str:
  """The text between the markers of block ``name`` in ``readme``."""
  text = Path(readme).read_text()
  start, end = _markers(name)
  m = re.search(re.escape(start) + r"\n(.*?)" + re.escape(end), text, re.S)
  if not m:
    raise ValueError(f"{readme} has no block {start} ... {end}")
  return m.group(1).rstrip("\n")


def write_block(readme, name: str, body: str) -> bool:
  """Replace the text between the markers of block ``name`` in ``readme`` with ``body``
  (the markers must exist); return whether the file changed."""
  readme = Path(readme)
  text = readme.read_text()
  start, end = _markers(name)
  pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
  if not pattern.search(text):
    raise ValueError(f"{readme} has no block {start} ... {end}")
  new = pattern.sub(lambda _: f"{start}\n{body.rstrip()}\n{end}", text, count=1)
  if new != text:
    readme.write_text(new)
  return new != text


def make(name: str) -> str:
  """The markdown of block ``name``, generated from the committed files."""
  _, maker = BLOCKS[name]
  module, func = maker.split(":")
  return getattr(importlib.import_module(module), func)().rstrip()


def _load_all() -> None:
  """Import the study modules, which register their blocks."""
  for module in STUDY_MODULES:
    importlib.import_module(module)


# The modules that register blocks (imported by ``python -m experiments._report`` and the test).
STUDY_MODULES = (
  "experiments.gan.results",
  "experiments.coevolution.lipizzaner_tables",
  "experiments.coevolution.ring_tables",
  "experiments.coevolution.ring_issue18",
  "experiments.pbt.results",
  "experiments.coevolution.lipizzaner_config",
  "experiments.gan.dynamics_report",
  "experiments.benchmarks.cluster_model",
  "experiments.benchmarks.past_the_floor",
  "experiments.benchmarks.suite_times",
  "experiments.benchmarks.host_overhead",
  "experiments.benchmarks.import_time",
  "experiments.benchmarks.eager_steps",
  "experiments.benchmarks.session_codegen",
  "experiments.benchmarks.dcgan_cpu",
  "experiments.benchmarks.bf16_parity",
  "experiments.study_record",  # docs/results.md: every version of every study
  "experiments.parity.page",  # docs/parity.md: the golden files and the outcome table
  "experiments.parity.lipizzaner_ring_tables",  # docs/parity.md: Lipizzaner's code vs the library
  "experiments.parity.lipizzaner_fmnist_tables",  # docs/parity.md: the same, Fashion-MNIST 2x2
  "experiments.doc_numbers",  # measured numbers of docs/running.md, coevolution.md, benchmarks.md
)


def incomplete_note(by_arm: dict, labels: dict, registered: int, where: str = "") -> list[str]:
  """The ``**Incomplete:**`` line (and a blank line) when an arm of ``by_arm`` (arm -> its
  runs) has fewer than the ``registered`` seeds; ``[]`` when every arm is complete."""
  short = [f"{labels.get(a, a)} ({len(rs)})" for a, rs in by_arm.items() if len(rs) < registered]
  if not short:
    return []
  return [
    f"**Incomplete:** {', '.join(short)} of {registered} registered seeds{where}; "
    "the verdicts below use the arms and seeds present.",
    "",
  ]


def tested(groups: dict, comparisons) -> list[tuple[str, str]]:
  """The comparisons ``(a, b)`` whose two arms both have at least two values."""
  return [(a, b) for a, b in comparisons if len(groups[a]) > 1 and len(groups[b]) > 1]


def family(
  groups: dict,
  comparisons,
  labels: dict,
  *,
  test: str,
  alpha: float,
  lower_is_better: bool,
  metric: str,
  digits: int = 1,
  alternative: str = "two-sided",
) -> list[str]:
  """Markdown bullets, one per comparison ``(a, b)`` of ``comparisons``: the verdict of
  ``experiments.stats.compare(groups[a], groups[b], test=test)`` at ``alpha`` on the
  Holm-adjusted p-value of the family (both p-values shown). A registered comparison
  whose arms did not run (fewer than two values) stays in the family with p = 1 and is
  reported as not tested, so an incomplete study is never corrected over fewer tests."""
  from experiments import stats

  comparisons = [tuple(c) for c in comparisons]
  ran = tested(groups, comparisons)
  results = {
    c: stats.compare(groups[c[0]], groups[c[1]], test=test, alternative=alternative) for c in ran
  }
  raw = [results[c]["p"] if c in results else 1.0 for c in comparisons]
  adjusted = stats.holm(raw) if len(raw) > 1 else raw
  missing = " (the missing comparison counted as p = 1)" if len(ran) < len(comparisons) else ""
  lines = []
  for c, p in zip(comparisons, adjusted):
    a, b = c
    if c not in results:
      lines.append(f"- {labels.get(a, a)} vs {labels.get(b, b)}: not tested, an arm did not run.")
      continue
    r = results[c]
    text = stats.verdict(
      dict(r, p=p),
      alpha=alpha,
      name_a=labels.get(a, a),
      name_b=labels.get(b, b),
      lower_is_better=lower_is_better,
      metric=metric,
      digits=digits,
    )
    if len(raw) > 1:
      text = holm_note(text, test, p, r["p"], f"{len(raw)}{missing}")
    lines.append(f"- {text}")
  return lines


def holm_note(text: str, test: str, p: float, raw: float, over: str) -> str:
  """``text``, a ``stats.verdict`` sentence on the Holm-adjusted ``p``, with its p-value
  written ``<test> p = <p> Holm-adjusted over <over>, <raw> raw``."""
  from experiments import stats

  shown = f"{stats.TEST_LABELS[test]} p = {stats.fmt_p(p)}"
  return text.replace(shown, f"{shown} Holm-adjusted over {over}, {stats.fmt_p(raw)} raw", 1)


def scorer_lines(scorer: dict | None) -> list[str]:
  """A blank line and the sentence naming the one evaluation classifier of a study."""
  if not scorer:
    return []
  return [
    "",
    f"Scored by one evaluation classifier: digest `{scorer['params_digest']}` "
    f"({scorer['test_accuracy']:.2%} test accuracy, trained on {scorer['trained_on']}).",
  ]


NOT_COMPUTED = "not computed (the committed JSON lacks it)"


def endpoint_lines(protocol_file: str, found: list, record: dict | None = None) -> list[str]:
  """The block's section **Registered endpoints**: the protocol (``protocol_file``, relative
  to the repository), its registration time from git (``experiments.registration``), the
  result JSON's registration ``record``, then every registered endpoint, the primary and each
  secondary, with its test and where the block reports it: ``found[0]`` for the primary,
  ``found[i + 1]`` for the i-th secondary; :data:`NOT_COMPUTED` where ``found`` has no entry
  or ``None``."""
  from experiments import registration, stats

  p = load_protocol(REPO / protocol_file)
  pr = p["primary"]
  metric = pr["metric"] if isinstance(pr["metric"], str) else " and ".join(pr["metric"])
  found = list(found) + [None] * (1 + len(p.get("secondary", [])) - len(found))
  lines = [
    "",
    f"**Registered endpoints** (`{protocol_file}`; registered "
    f"{registration.registered(REPO / protocol_file, p.get('registered'))}). "
    + registration.describe(record),
    f"- Primary: {metric}, at {p['endpoint']}; {stats.TEST_LABELS[pr['test']]} "
    f"({pr['alternative']}, alpha {pr['alpha']}, correction: {pr.get('correction', 'none')}): "
    f"{found[0] or NOT_COMPUTED}",
  ]
  for i, text in enumerate(p.get("secondary", [])):
    lines.append(f"- Secondary {i + 1}: {text}: {found[i + 1] or NOT_COMPUTED}")
  return lines


def verdict_lines(block: str) -> list[str]:
  """The registered verdicts of a generated block: its ``**Incomplete:**`` line, if any,
  and the bullets after its first ``**Primary**`` or ``**Verdicts**`` line, or a one-line
  ``**Verdict (...):** ...`` paragraph (as a bullet, without its bold label)."""
  lines = block.splitlines()
  out = [ln for ln in lines if ln.startswith("**Incomplete:**")]
  for ln in lines:
    if ln.startswith("**Verdict ") or ln.startswith("**Verdict:"):
      return out + ["- " + ln.split(":**", 1)[1].strip()]
  start = next(
    (i for i, ln in enumerate(lines) if ln.startswith(("**Primary**", "**Verdicts**"))), None
  )
  if start is None:
    return out
  bullets = []
  for ln in lines[start + 1 :]:
    if ln.startswith("- "):
      bullets.append(ln)
    elif bullets and not ln.strip():
      break
  return out + bullets


def main() -> None:
  # run as ``python -m experiments._report`` this file is ``__main__``: the study modules
  # register their blocks in the importable module, so read the registry from there
  report = importlib.import_module("experiments._report")
  report._load_all()
  missing = []
  for name, (readme, _) in sorted(report.BLOCKS.items()):
    try:
      changed = report.write_block(REPO / readme, name, report.make(name))
    except ValueError as e:
      missing.append(name)
      print(f"{readme} [{name}]: NOT WRITTEN: {e}")
      continue
    print(f"{readme} [{name}]: {'rewritten' if changed else 'unchanged'}")
  if missing:
    raise SystemExit(f"{len(missing)} block(s) not written: {', '.join(missing)}")


if __name__ == "__main__":
  main()
