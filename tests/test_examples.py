"""The worked examples under examples/ (a GAN written in flax.nnx, one in equinox) run at a
small size and print what they promise: the losses and the modes covered."""

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_example(name: str, *argv: str) -> str:
  spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    module.main(list(argv))
  return out.getvalue()


def _check_output(text: str, steps: int) -> None:
  losses = re.fullmatch(rf"after {steps} steps: losses G (\S+), D (\S+)", text.splitlines()[0])
  assert losses, text
  assert all(0.0 < float(x) < 10.0 for x in losses.groups()), text
  modes = re.fullmatch(r"modes covered: (\d)/8, high-quality (\d+)%", text.splitlines()[1])
  assert modes and 0 <= int(modes.group(1)) <= 8 and 0 <= int(modes.group(2)) <= 100, text


@pytest.mark.parametrize("name", ["nnx_gan", "equinox_gan"])
def test_example_trains_and_prints_modes_covered(name):
  if name == "equinox_gan":
    pytest.importorskip("equinox")
  _check_output(_run_example(name, "--steps", "6", "--batch", "16"), 6)


def test_nnx_example_with_alternating_steps():
  _check_output(
    _run_example("nnx_gan", "--steps", "3", "--batch", "8", "--scheme", "alternating"), 3
  )


@pytest.mark.parametrize("name", ["nnx_gan", "equinox_gan"])
def test_examples_are_short_and_use_la_extragrad_over_adam(name):
  text = (ROOT / "examples" / f"{name}.py").read_text()
  assert len(text.splitlines()) <= 80
  assert "mml.lookahead_minmax(inner" in text and "mml.extragradient(adam)" in text
  assert "optax.adam(" in text
  assert "mml.split_models(" in text and "--steps" in text
