"""runner.program_cache: one build per config up to loop-only fields, keyed without JSON."""

import ml_collections

from minmaxlab import runner
from minmaxlab.runner._compile_cache import config_key


def _config(**kw):
  c = ml_collections.ConfigDict({"seed": 0, "lr": 1e-3, "net": {"hidden": (8, 8)}, "steps": 10})
  c.update(kw)
  return c


def test_one_build_per_config_up_to_loop_fields():
  built = []

  @runner.program_cache(loop_only=("seed", "steps"))
  def programs(config):
    built.append(config)
    return object()

  a = programs(_config())
  assert programs(_config(seed=3, steps=99)) is a  # loop-only fields: the same programs
  assert len(built) == 1
  # The build never sees the loop-only fields (so programs cannot depend on them).
  assert "seed" not in built[0] and "steps" not in built[0] and built[0].lr == 1e-3
  b = programs(_config(lr=2e-3))
  c = programs(_config(net={"hidden": (8, 16)}))
  assert len({id(a), id(b), id(c)}) == 3 and len(built) == 3
  # maxsize=2: the least recently used (a) was dropped and is built again.
  assert programs(_config()) is not a and len(built) == 4
  programs.cache_clear()
  programs(_config(lr=2e-3))
  assert len(built) == 5


def test_key_keeps_types_and_nesting():
  key = lambda **kw: config_key({"a": 1, "b": [1, 2], "c": {"d": 0.5}, **kw})  # noqa: E731
  assert key() == key(b=(1, 2))  # lists and tuples alike (configs from files vs flags)
  assert key() != key(a=1.0) and key() != key(a=True)  # 1, 1.0 and True differ
  assert key(c={"d": float("nan")}) == key(c={"d": float("nan")})
  assert key() != key(c={"d": 0.5, "e": None})
  assert config_key({"x": 1, "y": 2}, ("y",)) == config_key({"x": 1, "y": 3}, ("y",))
  hash(key(z={"w": [{"v": 1}]}))


def test_plain_dict_configs_and_unbounded():
  calls = []
  cached = runner.program_cache(lambda cfg: calls.append(cfg) or len(calls), maxsize=None)
  assert [cached({"k": i % 3}) for i in range(9)] == [1, 2, 3] * 3
  assert calls == [{"k": 0}, {"k": 1}, {"k": 2}]
