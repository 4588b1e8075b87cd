"""The progress bar on terminals of every width (issue 35): plain lines when the terminal
reports 0 columns, a bar of fixed width whose values are cut to the terminal's width, and a
label that tells one loop from another."""

from __future__ import annotations

import io

from minmaxlab import runner
from minmaxlab.runner import _progress

METRICS = {"modes_covered": 3, "high_quality_rate": 0.25, "best_score": 1.0, "mode_kl": 0.125}


class _Tty(io.StringIO):
  def isatty(self):
    return True


def test_a_terminal_of_0_columns_gets_plain_lines(monkeypatch):
  monkeypatch.setattr(_progress, "_columns", lambda stream: 0)
  out = _Tty()
  bar = runner.ProgressBar(40, stream=out, unit="generation", label="baseline")
  bar.update(2, {"g_loss": 0.5})
  bar.close()
  assert out.getvalue().startswith("baseline | generation 2/40 | ")
  assert "\r" not in out.getvalue() and out.getvalue().endswith("g_loss=0.5\n")


def test_the_bar_keeps_its_width_and_the_values_fit_the_terminal(monkeypatch):
  for columns in (120, 80, 200):
    monkeypatch.setattr(_progress, "_columns", lambda stream, c=columns: c)
    out = _Tty()
    bar = runner.ProgressBar(40, stream=out, unit="generation", width=24)
    for step in (2, 3):
      bar.update(step, {"g_loss": 0.6873, "d_loss": 1.487}, METRICS)
    bar.close()
    lines = [line for line in out.getvalue().replace("\n", "\r").split("\r") if line]
    assert all(len(line) <= columns for line in lines), (columns, lines)
    last = lines[-1]
    assert last.split("|")[1] == "#" * 1 + "8" + " " * 22  # 3/40 of 24 characters
    if columns >= 120:
      assert "g_loss=0.6873" in last
    if columns == 200:
      assert "mode_kl=0.125" in last  # room for everything


def test_a_label_names_the_loop():
  plain = io.StringIO()
  runner.ProgressBar(4, stream=plain, unit="generation", label="baseline").update(1)
  assert plain.getvalue().startswith("baseline | generation 1/4 | ")
  tty = _Tty()
  bar = runner.ProgressBar(4, stream=tty, unit="generation", label="baseline")
  bar.update(1)
  bar.close()
  assert "baseline:" in tty.getvalue()


def test_an_anonymous_compiled_program_is_named_by_its_caller():
  import jax
  import jax.numpy as jnp

  from minmaxlab.runner import _lifecycle

  assert _lifecycle._program_name("jit(step)") == "jit(step)"
  name = _lifecycle._program_name("jit(<lambda>)")
  assert name.startswith("jit(<lambda>) in test_an_anonymous_compiled_program_is_named_by_its_")
  assert "(test_progress.py:" in name
  out = io.StringIO()
  reporter = runner.report_compilation(stream=out, announce_after=0.0, min_seconds=0.0)
  try:

    def local_loop():
      return jax.jit(lambda x: jnp.sin(x) * 3.0)(jnp.arange(7.0))

    local_loop()
  finally:
    reporter.enabled = False
  assert "compiled jit(<lambda>) in local_loop (test_progress.py:" in out.getvalue()


def test_metrics_from_an_earlier_step_say_when_they_were_measured():
  """Issue 47: GAN log lines repeated the last evaluation's metrics as if measured at each
  logged step."""
  plain = io.StringIO()
  bar = runner.ProgressBar(30, stream=plain)
  bar.update(10, {"g_loss": 0.5}, {"mode_kl": 2.0})
  bar.update(20, {"g_loss": 0.4})
  bar.update(30, {"g_loss": 0.3}, {"mode_kl": 1.0})
  lines = plain.getvalue().splitlines()
  assert lines[0].endswith("| g_loss=0.5 mode_kl=2")
  assert lines[1].endswith("| g_loss=0.4 (evaluated at step 10) mode_kl=2")
  assert lines[2].endswith("| g_loss=0.3 mode_kl=1")
