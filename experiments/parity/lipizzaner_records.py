"""The reference's event log (``lipizzaner_driver.py``) as the golden file's arrays.

The driver logs, in the order the reference runs them: its noise draws (``noise``), its
``random.sample`` / ``random.choice`` picks as indices (``sample``, ``choice``), its numpy draws
(``normal``, ``rand``) and each phase's outcome (``fitness``, ``winners``, ``updated``,
``replacement_out``, ``mixture``...). :func:`golden_arrays` walks that log once and files every
draw under the phase that consumed it. Weights are torch's layout (``W [out, in]``).
"""

from __future__ import annotations

import numpy as np


def _weights(records: list, prefix: str, out: dict) -> None:
  """``prefix + 'w0'`` ... : the stacked k-th parameter of every record."""
  for k in range(len(records[0]["weights"])):
    out[f"{prefix}w{k}"] = np.asarray([r["weights"][k] for r in records], np.float32)


def _initial(raw: dict, out: dict) -> None:
  for side, name in ((0, "g"), (1, "d")):
    cells = [cell[side] for cell in raw["initial"]]
    for k in range(len(cells[0][0]["weights"])):
      out[f"init_{name}_w{k}"] = np.asarray(
        [[ind["weights"][k] for ind in cell] for cell in cells], np.float32
      )


def _update(value: dict, pending: list, ups: dict) -> None:
  draws = {kind: [v for kk, v in pending if kk == kind] for kind in ("noise", "normal", "rand")}
  choice = [v for kk, v in pending if kk == "choice"]
  side = "d" if "/D" in value["attackers"][0] else "g"
  ups["side"].append(0 if side == "g" else 1)
  ups["real"].append(value["real"])
  ups["choice"].append(choice[0])
  ups["defenders"].append(value["defenders"])
  ups["attackers"].append(value["attackers"])
  ups["noise"].append(draws["noise"])
  ups["mut_normal"].append(ups.pop("_mut_normal"))
  ups["mut_rand"].append(ups.pop("_mut_rand"))
  ups["order"].append(side)


def golden_arrays(raw: dict) -> tuple[dict, dict]:
  """``(arrays, meta)``: the ``.npz`` content and the sidecar's facts (ids, topology)."""
  case = raw["case"]
  out = {
    "real": np.asarray(case["real"], np.float32),
    "modes": np.asarray(case["modes"], np.float32),
  }
  _initial(raw, out)
  out["all_nodes"] = np.asarray(raw["all_nodes"], np.int32)
  meta = {
    "neighbours": raw["neighbours"],
    "seed_used": raw["seed_used"],
    "score_sample_size": raw["score_sample_size"],
    "settings": {k: v for k, v in case.items() if k not in ("real", "modes")},
    "fitness": [],
    "tournaments": [],
    "updates": [],
    "replacements": [],
  }
  ups = {k: [] for k in ("side", "real", "choice", "noise", "mut_normal", "mut_rand", "order")}
  ups.update(defenders=[], attackers=[], records_g=[], records_d=[])
  pending, fit, tour, repl, mixture_weights, scores = [], [], [], [], [], []
  for e in raw["events"]:
    kind, value = e["kind"], e["value"]
    if kind in ("noise", "normal", "rand", "choice", "sample"):
      pending.append((kind, value))
      continue
    if kind == "fitness":
      noise = [v for k, v in pending if k == "noise"]
      a, d = len(value["attackers"]), len(value["defenders"])
      j = len(fit)
      out[f"fit{j}_noise"] = np.asarray(noise, np.float32).reshape(a, d, -1, case["latent_dim"])
      out[f"fit{j}_values"] = np.asarray(value["values"], np.float64)
      fit.append({"attackers": value["attackers"], "defenders": value["defenders"]})
    elif kind == "winners":
      j = len(tour) - 1
      out[f"tour{j}_samples"] = np.asarray([v for k, v in pending if k == "sample"], np.int32)
      tour[-1]["winners"] = value
    elif kind == "tournament_pool":
      tour.append({"pool": value})
    elif kind == "update":
      normal = [v for k, v in pending if k == "normal"]
      rand = [v for k, v in pending if k == "rand"]
      ups["_mut_normal"], ups["_mut_rand"] = normal[-1], rand[-1]
      pending = []
      ups["_update"] = value
      continue
    elif kind == "updated":
      _update(ups.pop("_update"), pending, ups)
      side = ups["order"][-1]
      ups[f"records_{side}"].append(value)
    elif kind == "replacement_in":
      repl.append(value)
    elif kind == "replacement_out":
      repl[-1]["out"] = value
    elif kind == "mixture_weights":
      mixture_weights.append(value)
      if len(mixture_weights) == 1:
        out["mix_noise"] = np.asarray([v for k, v in pending if k == "normal"][-1], np.float64)
    elif kind == "score":
      scores.append(value)
    elif kind == "mixture":
      out["mix_before"] = np.asarray([w for _, w in value["before"]], np.float64)
      out["mix_after"] = np.asarray([w for _, w in value["after"]], np.float64)
      meta["mixture_nodes"] = [n for n, _ in value["before"]]
    pending = []
  _updates_out(ups, out, meta)
  _outcomes(raw, repl, mixture_weights, scores, out, meta)
  meta["fitness"], meta["tournaments"] = fit, tour
  return out, meta


def _updates_out(ups: dict, out: dict, meta: dict) -> None:
  out["upd_side"] = np.asarray(ups["side"], np.int32)
  out["upd_real"] = np.asarray(ups["real"], np.float32)
  out["upd_choice"] = np.asarray(ups["choice"], np.int32)
  out["upd_noise"] = np.asarray(ups["noise"], np.float32)
  out["upd_mut_normal"] = np.asarray(ups["mut_normal"], np.float64)
  out["upd_mut_rand"] = np.asarray(ups["mut_rand"], np.float64)
  for name in ("g", "d"):
    recs = ups[f"records_{name}"]
    if not recs:
      continue
    for k in range(len(recs[0][0]["weights"])):
      out[f"upd_{name}_w{k}"] = np.asarray(
        [[ind["weights"][k] for ind in r] for r in recs], np.float32
      )
    out[f"upd_{name}_lr"] = np.asarray([[i["learning_rate"] for i in r] for r in recs])
    out[f"upd_{name}_adam_lr"] = np.asarray([[i["adam_lr"] for i in r] for r in recs])
  meta["updates"] = [
    {"attackers": a, "defenders": d} for a, d in zip(ups["attackers"], ups["defenders"])
  ]


def _outcomes(raw, repl, mixture_weights, scores, out, meta) -> None:
  """Replacement (before and after), the final local populations and the mixture ES."""
  for j, r in enumerate(repl):
    for part in ("local", "new"):
      out[f"repl{j}_{part}_fit"] = np.asarray([i["fitness"] for i in r[part]], np.float64)
      _weights(r[part], f"repl{j}_{part}_", out)
    meta["replacements"].append(
      {"local": [i["id"] for i in r["local"]], "new": [i["id"] for i in r["new"]], "out": r["out"]}
    )
  for side, name in ((0, "g"), (1, "d")):
    final = raw["final_local"][side]
    out[f"final_{name}_fit"] = np.asarray([i["fitness"] for i in final], np.float64)
    _weights(final, f"final_{name}_", out)
  out["mix_weights_seen"] = np.asarray(mixture_weights, np.float64)  # [before, proposal]
  out["mix_scores"] = np.asarray([s["value"] for s in scores], np.float64)
  meta["mixture_score_samples"] = [s["n_samples"] for s in scores]
