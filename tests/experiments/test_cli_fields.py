"""The one-line error for an unknown ``--config.<field>`` names the closest field and lists
every field of the config file (issue 35: the old line said "see --help", which lists none)."""

from __future__ import annotations

import ml_collections

from experiments import _cli

GAN = "experiments/gan/configs/smoke.py"


def test_config_fields_are_dotted_for_nested_configs():
  config = ml_collections.ConfigDict({"a": 1, "inner": {"b": 2, "c": {"d": 3}}, "e": "x"})
  assert sorted(_cli.config_fields(config)) == ["a", "e", "inner.b", "inner.c.d"]


def test_unknown_field_line_names_the_closest_field_and_lists_every_field():
  line = _cli.unknown_field_line(["main", "--config", GAN, "--config.batch_sise=4"])
  assert line.startswith("unknown config field: batch_sise (did you mean batch_size?); the ")
  assert f"fields of {GAN}: " in line and "\n" not in line
  for field in ("batch_size", "num_steps", "classifier.steps", "scheme"):
    assert field in line.split(": ", 2)[-1].split(", ")


def test_unknown_field_line_reads_the_config_parameter_and_nested_names():
  argv = ["main", "--config=experiments/gan/configs/cifar10_lagan.py:altgan"]
  assert _cli.unknown_field_line([*argv, "--config.classifier.steps=3"]) is None  # exists
  assert _cli.unknown_field_line([*argv, "--config.classifier=3"]) is None  # a nested config
  line = _cli.unknown_field_line([*argv, "--config.classifier.stepz=3"])
  assert line.startswith("unknown config field: classifier.stepz (did you mean classifier.steps?)")


def test_unknown_field_line_is_none_without_a_loadable_config(tmp_path):
  assert _cli.unknown_field_line(["main", "--config.x=1"]) is None
  assert _cli.unknown_field_line(["main", "--config", str(tmp_path / "nope.py"), "--x"]) is None


def test_config_help_lists_every_field_with_its_value():
  text = _cli.config_help(["main", "--config", GAN, "--help"])
  want = f"config fields of {GAN} (change one with --config.<field>=<value>):"
  assert text.splitlines()[1] == want
  assert "  --config.classifier.steps=" in text and "  --config.batch_size=" in text
  assert "add --config FILE" in _cli.config_help(["main", "--help"])


def _run(*args):
  import os
  import sys

  from tests import _procs

  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  return _procs.run([sys.executable, "-m", "experiments.gan.main", *args], env=env, timeout=300)


def test_help_lists_the_config_fields_after_the_flags():
  proc = _run("--config", GAN, "--help")
  assert proc.returncode == 0, proc.stderr[-2000:]
  flags_at = proc.stdout.index("--workdir")
  assert proc.stdout.index(f"config fields of {GAN}") > flags_at
  assert "--config.num_steps=" in proc.stdout


def test_a_workdir_that_cannot_be_created_is_one_line(tmp_path):
  proc = _run("--config", GAN, "--workdir", "/proc/minmaxlab_test_workdir")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines() == [
    "ERROR: the workdir /proc/minmaxlab_test_workdir cannot be written: No such file or directory"
  ]


def test_a_hidden_value_that_is_not_widths_is_named():
  import pytest

  from minmaxlab.gan import models

  for bad in ("abc", ("abc",), 3):
    with pytest.raises(ValueError, match=r"hidden must be a sequence of layer widths, e\.g\."):
      models.mlp_generator((2,), latent_dim=4, hidden=bad)
