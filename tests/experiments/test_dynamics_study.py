"""The game-dynamics study of issue 39 (experiments/gan/dynamics_study.py and
dynamics_report.py): the command end to end on a tiny config, and the report of
per-seed JSON (every seed a row, the co-primary verdicts Holm-adjusted over two)."""

from __future__ import annotations

import json

import numpy as np

import minmaxlab as mml
from experiments.gan import dynamics_report, dynamics_study


def _protocol(tmp_path, **settings):
  p = json.loads(dynamics_study.PROTOCOL.read_text())
  p["settings"].update(settings)
  p["endpoint_steps"] = [20, 40]
  path = tmp_path / "protocol.json"
  path.write_text(json.dumps(p))
  return path


def test_the_study_command_runs_a_tiny_config_end_to_end(tmp_path):
  protocol = _protocol(
    tmp_path,
    config_module="experiments.gan.configs.smoke",
    dataset="ring8",
    steps=40,
    batch_size=16,
    log_every=10,
    eval_every=20,
    eval_samples=64,
    dynamics=dict(batch_size=8, num_eigenvalues=2, eigen_iterations=3, num_probes=1),
  )
  args = ["--trial", "--protocol", str(protocol), "--runs", str(tmp_path / "runs"), "--out"]
  args.append(str(tmp_path / "out"))
  dynamics_study.main(["run", "--arms", "la_alt_k5", "--seeds", "0", *args])
  (result,) = (tmp_path / "out").glob("*.json")
  record = json.loads(result.read_text())
  assert record["arm"] == "la_alt_k5" and record["seed"] == 0 and record["steps"] == 40
  assert [row["step"] for row in record["curves"]] == [20, 40]
  assert 0 <= record["curves"][-1]["dynamics/rotation_share"] <= 1
  assert "dynamics/spectral_radius_per_step" in record["curves"][-1]
  written = result.stat().st_mtime_ns
  dynamics_study.main(["run", "--arms", "la_alt_k5", "--seeds", "0", *args])  # done: skipped
  assert result.stat().st_mtime_ns == written
  assert (tmp_path / "out" / "dynamics.png").stat().st_size > 0  # drawn after the record
  out = dynamics_report.readme_table(protocol, tmp_path / "out")
  assert "| LA-AltGAN k=5 | 0 | 40 |" in out and "**Incomplete:**" in out
  # A shorter version of the study reuses the longer run's rows, without training.
  short = json.loads(protocol.read_text())
  short["settings"]["steps"], short["endpoint_steps"] = 20, [20]
  protocol.write_text(json.dumps(short))
  dynamics_study.main(["run", "--arms", "la_alt_k5", "--seeds", "0", *args[:-1], str(tmp_path)])
  reused = json.loads((tmp_path / "la_alt_k5_s0.json").read_text())
  assert reused["steps"] == 20 and reused["trained_to"] == 40
  assert reused["cpu_s_last_process"] is None and reused["curves"] == record["curves"][:1]


def _run(arm, seed, share, imag, diverged=None):
  curves = [
    {"step": s, "fid": 50.0 + seed, "dynamics/rotation_share": share, "dynamics/max_imag": imag}
    for s in (20, 40)
  ]
  label = {"alt": "AltGAN", "la_alt_k5": "LA-AltGAN k=5"}[arm]
  record = dict(arm=arm, label=label, seed=seed, steps=40, diverged=diverged, curves=curves)
  return dict(
    record,
    cpu_s_last_process=30.0,
    classifier=dict(params_digest="d", test_accuracy=0.9, trained_on="x"),
  )


def test_the_report_tests_both_metrics_with_holm_and_shows_every_seed(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  runs = [_run("alt", s, 0.4 + 0.01 * s, 2.0 + s) for s in range(5)]
  runs += [_run("la_alt_k5", s, 0.2 + 0.01 * s, 2.5 + s) for s in range(4)]
  runs.append(_run("la_alt_k5", 4, np.nan, np.nan, diverged="NaN at step 30"))
  for seed, lam in ((0, [1 + 0.1j, 1 - 0.1j]), (1, [1.5])):  # a rotation; a real expansion
    runs[seed]["curves"][-1]["dynamics/operator_eigenvalues_re"] = np.real(lam).tolist()
    runs[seed]["curves"][-1]["dynamics/operator_eigenvalues_im"] = np.imag(lam).tolist()
  for r in runs:
    (out / f"{r['arm']}_s{r['seed']}.json").write_text(json.dumps(r))
  text = dynamics_report.readme_table(_protocol(tmp_path), out)
  assert text.count("| AltGAN |") == 5 and text.count("| LA-AltGAN k=5 |") == 5
  assert "| LA-AltGAN k=5 | 4 | 40 (diverged) | - |" in text
  primary = text.split("**Primary**")[1]
  # Every LA share below every AltGAN share: exact p = 2/126 at n = 4/5, doubled by Holm.
  assert "rotational share: lower under LA-AltGAN k=5 than under AltGAN: 0.215 vs 0.420" in primary
  assert "p = 0.032 Holm-adjusted over 2, 0.016 raw" in primary
  assert "top |Im λ|: No difference detected at n = 4/5" in primary
  k = mml.transforms.spectral_sync_period([1 + 0.1j, 1 - 0.1j]).sync_period
  assert f"s0: k = {k}; s1: none (largest real eigenvalue 1.50000)." in text
  assert "CPU time of the 10 runs trained by this version: 5.0 CPU-minutes" in text
  assert dynamics_report.plot(dynamics_study.load_runs(out), tmp_path / "f.png").exists()
