"""The parity page's generated block (``parity`` in ``docs/parity.md``), from committed files only.

Per original (LAGAN, Lipizzaner): what the golden files compare (each file's case, the
original's code, the steps or phases recorded, the tolerance, the original's commit and the
command that made it, all read from the files' JSON sidecars in ``tests/parity/data/``), the
golden-file tests (read from ``tests/parity/test_*.py`` with :mod:`ast`: each test's name and the
first line of its docstring), and the outcome table: the ring study's version 3, the
reference's coupling run whole by the library beside the plain GAN
(``experiments/coevolution/results/ring_v3.json``, its verdicts by the protocol's registered
test, :func:`experiments.coevolution.ring_tables.primary_results`).

    python -m experiments._report      # rewrites this block with every other one
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from experiments import _report

REPO = Path(_report.REPO)
DATA = REPO / "tests" / "parity" / "data"
TESTS = REPO / "tests" / "parity"
DOC = "docs/parity.md"
ORIGINALS = {  # prefix of the golden files and tests -> the original's name on the page
  "lagan": "LAGAN (Chavdarova et al., Lookahead-minmax)",
  "lipizzaner": "Lipizzaner (ALFA-group/lipizzaner-gan)",
}


def sidecars(prefix: str) -> list[dict]:
  """The JSON sidecars of the golden files ``<prefix>_*.json``, by file name, each with
  ``file`` (its repository path) added."""
  out = []
  for path in sorted(DATA.glob(f"{prefix}_*.json")):
    side = json.loads(path.read_text())
    out.append({**side, "file": path.relative_to(REPO).as_posix()})
  return out


def test_names(prefix: str) -> list[tuple[str, str]]:
  """Every test of ``tests/parity/test_<prefix>_*.py``: (``path::name``, the first sentence of
  its docstring or '')."""
  out = []
  for path in sorted(TESTS.glob(f"test_{prefix}_*.py")):
    tree = ast.parse(path.read_text())
    for node in tree.body:
      if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
        out.append((f"{path.relative_to(REPO).as_posix()}::{node.name}", _summary(node)))
  return out


def _summary(node: ast.FunctionDef) -> str:
  """The first sentence of the docstring of ``node`` (its first paragraph, on one line)."""
  para = " ".join((ast.get_docstring(node) or "").split("\n\n")[0].split())
  end = para.find(". ")
  return para if end < 0 else para[: end + 1]


def _one(values, what: str) -> str:
  """The one value the sidecars share, or each one, separated by '; '."""
  found = list(dict.fromkeys(str(v) for v in values))
  if not found:
    raise ValueError(f"no golden file records {what}")
  return found[0] if len(found) == 1 else "; ".join(found)


def _g(x: float) -> str:
  return f"{x:g}"


def lagan_lines(files: list[dict]) -> list[str]:
  """What the LAGAN golden files compare: one row per file."""
  nets = [f for f in files if "torch_parameters" in f]
  files = [f for f in files if "snapshots" in f]
  lines = [
    f"Original: `{_one((f['reference'] for f in files), 'the original')}` at commit "
    f"`{_one((f['reference_commit'] for f in files), 'a commit')}` (torch "
    f"{_one((f['torch'] for f in files), 'torch')}). Made by:",
    "",
    "```",
    _one((f["command"] for f in files), "a command"),
    "```",
    "",
    "| golden file | the original's code | case | steps compared | float32 vs float64 of "
    "the original at the last step | tolerance (max abs) |",
    "|---|---|---|---|---|---|",
  ]
  for f in files:
    opts = ", ".join(f"{k} {v}" for k, v in f["options"].items() if k != "kind")
    sets = ", ".join(f"{k} {_g(v)}" for k, v in f["settings"].items())
    steps = ", ".join(str(s) for s in f["snapshots"])
    last = str(f["snapshots"][-1])
    tol = f["tolerance"]
    lines.append(
      f"| `{f['file']}` | {f['reference_code']} | {f['options']['kind']}: {opts}; {sets} | "
      f"{steps} | {_g(f['float32_vs_float64_max_abs'][last])} | float32 at steps "
      f"{', '.join(steps.split(', ')[:-1])}: {_g(tol['float32_steps_1_10_max_abs'])}; float64 "
      f"at {steps}: {_g(tol['float64_steps_1_10_200_max_abs'])}; a perturbed option misses "
      f"by at least {_g(tol['perturbed_option_min_abs_at_200'])} at step {last} |"
    )
  return lines + network_lines(nets)


def network_lines(files: list[dict]) -> list[str]:
  """The golden files of the original's networks (``lagan_dcgan_golden.py``): one row each."""
  if not files:
    return []
  lines = [
    "",
    'The networks (`make_pair("dcgan_notebook")` against the notebook\'s own cells, on '
    "weights exported from the library: forward outputs, then one AltGAN step of its Adam):",
    "",
    "| golden file | the original's code | batch | parameters | largest float32 vs float64 "
    "gap of the original (forward output; any gradient) | made by |",
    "|---|---|---|---|---|---|",
  ]
  for f in files:
    gaps = f["float32_vs_float64_max_abs"]
    grad = max(v for k, v in gaps.items() if k.startswith("grad/"))
    lines.append(
      f"| `{f['file']}` | {f['reference_code']} | {f['batch']} | {len(f['torch_parameters'])} "
      f"tensors | {_g(gaps['out/g_z'])}; {_g(grad)} | `{f['command']}` |"
    )
  return lines


def _phases(f: dict) -> str:
  """The phases a Lipizzaner golden file records, with how many of each."""
  counts = [
    (len(f.get("fitness", [])), "fitness matrices"),
    (len(f.get("tournaments", [])), "tournaments"),
    (len(f.get("updates", [])), "training updates"),
    (len(f.get("replacements", [])), "replacements"),
    (len(f.get("mixture_score_samples", [])), "mixture scores"),
  ]
  return ", ".join(f"{n} {what}" for n, what in counts if n)


def lipizzaner_lines(files: list[dict]) -> list[str]:
  """What the Lipizzaner golden files compare: one row per file."""
  ref = _one((f["reference"] for f in files), "the original").split()
  lines = [
    f"Original: `{ref[0]}` at commit `{ref[-1]}`. Made by:",
    "",
    "```",
    _one((f["command"] for f in files), "a command"),
    "```",
    "",
    "| golden file | case | phases recorded | tolerance |",
    "|---|---|---|---|",
  ]
  for f in files:
    if "settings" in f:
      s = f["settings"]
      case = (
        f"cell {s['cell']} of a {s['dim']}x{s['dim']} grid (neighbours "
        f"{', '.join(str(n) for n in f['neighbours'])}), {s['population_size']} individual(s) a "
        f"cell, selection {'on' if s['selection'] else 'off'}, {s['n_batches']} batches of "
        f"{s['batch_size']}, `discriminator_skip_each_nth_step` "
        f"{s['discriminator_skip_each_nth_step']}, "
        f"mutation p {_g(s['mutation_probability'])}; every client's seed {f['seed_used']}, "
        f"mixture scores on {f['score_sample_size']} samples"
      )
      tol = f["tolerance"]
      lines.append(
        f"| `{f['file']}` | {case} | {_phases(f)} | rtol {_g(tol['rtol'])}, atol "
        f"{_g(tol['atol'])}: {tol['why']} |"
      )
    else:  # the topology file: exact
      grids = ", ".join(f"{d}x{d}" for d in f["neighbours"])
      lines.append(
        f"| `{f['file']}` | every cell's neighbours ({grids}); every client's seed "
        f"({len(f['heuristic_seeds'])} clients) | neighbourhoods, seeds | exact |"
      )
  return lines


def outcome_lines() -> list[str]:
  """The outcome table: ring v3's registered verdicts, one row per primary metric."""
  from experiments import stats
  from experiments.coevolution import ring_tables

  where = ring_tables.paths(3)
  rel = where["results"].relative_to(REPO).as_posix()
  if not where["results"].exists():
    return [f"No runs yet: `{rel}` is not there."]
  protocol = ring_tables.load_protocol(where["protocol"])
  data = json.loads(where["results"].read_text())
  pr = protocol["primary"]
  lines = [
    f"From `{rel}` (protocol `{data['protocol']}`; {stats.TEST_LABELS[pr['test']]}, "
    f"{pr['alternative']}, alpha {pr['alpha']:g}, Holm over the {pr['family'].split(':')[0][4:]}; "
    f"{protocol['endpoint']}):",
    "",
    "| metric | arm A | arm B | mean A | mean B | difference A - B (95% CI) | n | p (Holm) "
    "| p (raw) | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for o in ring_tables.primary_results(protocol, data):
    r = o["result"]
    label, digits, _ = ring_tables.PRIMARY.get(o["metric"], (o["metric"], 2, 2))
    f = lambda x: f"{x:.{digits}f}"  # noqa: E731
    lo, hi = r["ci"]
    lines.append(
      f"| {label} | {ring_tables.arm_name(protocol, o['a'])} | "
      f"{ring_tables.arm_name(protocol, o['b'])} | {f(r['mean_a'])} | {f(r['mean_b'])} | "
      f"{f(r['effect'])} [{f(lo)}, {f(hi)}] | {r['n_a']}/{r['n_b']} | "
      f"{stats.fmt_p(o['p_adjusted'])} | {stats.fmt_p(r['p'])} | {o['verdict']} |"
    )
  return lines


def block() -> str:
  """The block ``parity`` of ``docs/parity.md``."""
  parts = []
  makers = {"lagan": lagan_lines, "lipizzaner": lipizzaner_lines}
  for prefix, title in ORIGINALS.items():
    parts += [f"## {title}", "", "**What the golden files compare.**", ""]
    parts += makers[prefix](sidecars(prefix))
    parts += ["", "**The golden-file tests** (`pytest tests/parity`, no torch needed):", ""]
    parts += [f"- `{name}`{': ' + doc if doc else ''}" for name, doc in test_names(prefix)]
    parts.append("")
  parts += ["## Outcome: the reference's coupling, whole, on the ring (ring v3)", ""]
  parts += outcome_lines()
  return "\n".join(parts)


_report.register("parity", DOC, f"{__name__}:block")
# the outcome parity of Lookahead-minmax registers its own block of docs/parity.md
from experiments.parity import lagan_outcome  # noqa: E402, F401
