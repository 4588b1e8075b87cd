"""Every string option of a public record is a ``Literal``: the allowed values are written once, in
the type, and the runtime check reads them from it (``typing.get_args``), so the two cannot drift.

Found by introspection: every dataclass and NamedTuple that a public package exports, every field
whose type is ``str`` (alone or in a union). A field that is free text (a path, a name, a message,
a small language parsed elsewhere) is listed in ``FREE_TEXT`` with why; a new string enum typed
``str`` fails ``test_every_string_field_of_a_public_record_is_a_literal``."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import types
import typing

import optax
import pytest

import minmaxlab
from minmaxlab import coevolution, pbt

# (class, field) -> why the field is free text rather than one of a closed set of values
FREE_TEXT = {
  ("CoevolutionConfig", "neighbourhood"): "a small language ('moore:2', 'custom:0,0;1,1') that"
  " coevolution.neighbour_offsets parses and checks",
  ("CoevolutionConfig", "loss"): "a key of the open registry gan.losses.LOSSES, 'mustangs' or"
  " 'wgan' (Coevolution checks it)",
  ("ArrayDataset", "name"): "the data set's name, for messages",
  ("TaskSpec", "target"): "an import path 'package.module:function'",
  ("Trial", "parent_ckpt"): "a checkpoint's path",
  ("Trial", "ckpt"): "a checkpoint's path",
  ("Trial", "worker"): "the id of the worker that ran the trial",
  ("Trial", "error"): "the last failure's message",
  **{
    (cls, "name"): "flax's own module name"
    for cls in ("BatchStatNorm", "DCGANDiscriminator", "DCGANGenerator", "Dense")
  },
}


def _public_packages() -> list[types.ModuleType]:
  found = [minmaxlab]
  for info in pkgutil.walk_packages(minmaxlab.__path__, "minmaxlab."):
    if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
      found.append(importlib.import_module(info.name))
  return found


def _records() -> dict[str, type]:
  """Every public dataclass and NamedTuple, by name."""
  out = {}
  for package in _public_packages():
    for name in getattr(package, "__all__", ()):
      obj = getattr(package, name)
      if inspect.isclass(obj) and (dataclasses.is_dataclass(obj) or hasattr(obj, "_fields")):
        out[obj.__name__] = obj
  return out


def _fields(cls) -> list[str]:
  return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else cls._fields


def _is_str(hint) -> bool:
  """``str``, or a union with ``str`` in it (a ``Literal``'s values are not types)."""
  if hint is str:
    return True
  if typing.get_origin(hint) in (typing.Union, types.UnionType):
    return any(_is_str(a) for a in typing.get_args(hint))
  return False


def _string_fields() -> dict[tuple[str, str], object]:
  out = {}
  for name, cls in sorted(_records().items()):
    hints = typing.get_type_hints(cls)
    for field in _fields(cls):
      if _is_str(hints.get(field)):
        out[(name, field)] = hints[field]
  return out


def test_the_records_are_found():
  records = _records()
  assert {"CoevolutionConfig", "ControllerConfig", "LookaheadConfig", "StepSizes"} <= set(records)
  assert len(records) > 30


def test_every_string_field_of_a_public_record_is_a_literal():
  untyped = sorted(set(_string_fields()) - set(FREE_TEXT))
  assert not untyped, f"string options without a Literal type (or a FREE_TEXT reason): {untyped}"


def test_every_free_text_entry_still_exists():
  assert not sorted(set(FREE_TEXT) - set(_string_fields()))


def _literal_fields(cls) -> dict[str, tuple]:
  hints = typing.get_type_hints(cls)
  return {
    f: typing.get_args(hints[f])
    for f in _fields(cls)
    if typing.get_origin(hints[f]) is typing.Literal
  }


def test_coevolution_config_checks_each_literal_from_its_type():
  """Each value of the type is accepted; another is one line naming it and the allowed set."""
  fields = _literal_fields(coevolution.CoevolutionConfig)
  assert len(fields) == 16, sorted(fields)
  for field, allowed in fields.items():
    for value in allowed:
      assert getattr(coevolution.CoevolutionConfig(**{field: value}), field) == value
    with pytest.raises(ValueError) as err:
      coevolution.CoevolutionConfig(**{field: "bogus"})
    assert str(err.value) == f"{field} must be one of {allowed}, got 'bogus'"


def test_controller_config_is_a_frozen_keyword_record():
  c = pbt.ControllerConfig(population_size=4, num_trials=8, steps_per_trial=2)
  assert (
    c.exploit == "tournament" == inspect.signature(pbt.vectorized_pbt).parameters["exploit"].default
  )  # the two PBT entry points exploit alike by default
  with pytest.raises(dataclasses.FrozenInstanceError):
    c.workers = 2
  with pytest.raises(TypeError):
    pbt.ControllerConfig(4, 8, 2)
  assert set(_literal_fields(pbt.ControllerConfig)["exploit"]) == {
    "tournament",
    "truncation",
    "none",
  }


def test_controller_refuses_a_bad_exploit_in_one_line(tmp_path):
  space = {"lr": pbt.Continuous(low=0.1, high=0.2)}
  config = pbt.ControllerConfig(
    population_size=2, num_trials=2, steps_per_trial=1, exploit="roulette"
  )
  with pytest.raises(ValueError) as err:
    pbt.Controller(tmp_path, space, "tests.pbt.test_pbt_controller:quadratic_task", config=config)
  assert (
    str(err.value) == "exploit must be one of ('tournament', 'truncation', 'none'), got 'roulette'"
  )
  with pytest.raises(ValueError, match="config must be a pbt.ControllerConfig, got dict"):
    pbt.Controller(tmp_path, space, "tests.pbt.test_pbt_controller:quadratic_task", config={})


@pytest.mark.parametrize(
  "call, allowed",
  [
    (
      lambda v: minmaxlab.extragradient(optax.sgd(0.1), update_point=v),
      ("extrapolated", "opponent_extrapolated"),
    ),
    (
      lambda v: minmaxlab.extragradient(optax.sgd(0.1), extrapolate_from=v),
      ("params", "last_iterate"),
    ),
    (lambda v: minmaxlab.lookahead_minmax(optax.sgd(0.1), slow_init=v), ("params", "lazy")),
    (lambda v: minmaxlab.analysis.closed_form_eigenvalues(v, 0.1), None),
  ],
  ids=["update_point", "extrapolate_from", "slow_init", "closed_form_method"],
)
def test_function_options_name_the_bad_value_and_the_literal(call, allowed):
  with pytest.raises(ValueError) as err:
    call("bogus")
  message = str(err.value)
  assert "\n" not in message and "'bogus'" in message
  if allowed is None:  # the schemes, spelled as the trainers spell them
    allowed = ("gda", "alternating", "extragradient", "optimistic")
  assert str(allowed) in message
