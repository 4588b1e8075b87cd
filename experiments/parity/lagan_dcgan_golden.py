"""Write the golden file of the MNIST notebook's DCGAN pair (``make_pair("dcgan_notebook")``).

    python -m experiments.parity.lagan_dcgan_golden --lagan PATH --python /work/refvenv/bin/python \
        --commit bb7c80e --out tests/parity/data

The library draws the pair's initial weights and the batches (:func:`inputs`, fixed keys);
they are exported in PyTorch's layout (:func:`to_torch`) and handed to
``lagan_dcgan_driver.py``, which runs the notebook's own ``GeneratorCNN28`` and
``DiscriminatorCNN28`` cells (in float32 and in float64) and one step of its AltGAN with its
Adam. ``lagan_dcgan.npz`` keeps the forward outputs and losses whole and, per parameter, the
gradient's norm and the gradient and the stepped value at ``SAMPLE`` fixed entries (the
pair has 3.9M parameters); ``lagan_dcgan.json``: command, commit, torch version, the inputs'
digest, PyTorch's parameter names and shapes, and the float32 run's distance from the
float64 one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile

import jax
import numpy as np

from experiments.parity.lagan_inputs import digest
from minmaxlab.gan import models

DRIVER = pathlib.Path(__file__).with_name("lagan_dcgan_driver.py")
BATCH, LATENT, SAMPLE, SEED = 8, 128, 256, 45
# library leaf -> the notebook's state_dict name (``main.<index>`` of its nn.Sequential).
G_NAMES = {"ConvTranspose_0": 0, "BatchStatNorm_0": 1, "ConvTranspose_1": 3}
G_NAMES |= {"BatchStatNorm_1": 4, "ConvTranspose_2": 6, "BatchStatNorm_2": 7, "ConvTranspose_3": 9}
D_NAMES = {"Conv_0": 0, "Conv_1": 2, "BatchStatNorm_0": 3, "Conv_2": 5, "BatchStatNorm_1": 6}
D_NAMES |= {"Conv_3": 8}
_TORCH_LEAF = {"kernel": "weight", "scale": "weight", "bias": "bias"}


def pair():
  return models.make_pair("dcgan_notebook", (28, 28, 1))


def inputs(gan=None):
  """The library's initial weights and the batches: ``(g_params, d_params, z, z2, real)``."""
  gan = gan or pair()
  kg, kd, kz, kz2, kr = jax.random.split(jax.random.key(SEED), 5)
  g, d = gan.generator.init(kg), gan.discriminator.init(kd)
  z = jax.random.normal(kz, (BATCH, LATENT))
  z2 = jax.random.normal(kz2, (BATCH, LATENT))
  real = jax.random.uniform(kr, (BATCH, 28, 28, 1), minval=-1.0, maxval=1.0)
  return g, d, z, z2, real


def _kernel_to_torch(module: str, k: np.ndarray) -> np.ndarray:
  if module.startswith("ConvTranspose"):  # flax (kh, kw, i, o), unflipped -> (i, o, kh, kw)
    return np.ascontiguousarray(np.flip(k, (0, 1)).transpose(2, 3, 0, 1))
  return np.ascontiguousarray(k.transpose(3, 2, 0, 1))  # (kh, kw, i, o) -> (o, i, kh, kw)


def kernel_from_torch(module: str, w: np.ndarray) -> np.ndarray:
  """The inverse of the export: a PyTorch weight in the library's kernel layout."""
  if module.startswith("ConvTranspose"):
    return np.ascontiguousarray(np.flip(w.transpose(2, 3, 0, 1), (0, 1)))
  return np.ascontiguousarray(w.transpose(2, 3, 1, 0))


def leaves(prefix: str, params) -> dict[str, tuple[str, np.ndarray]]:
  """``{library path: (PyTorch name, value in the library's layout)}`` of one network."""
  names = G_NAMES if prefix == "G" else D_NAMES
  out = {}
  for module, sub in params.items():
    if module not in names:
      raise ValueError(f"{prefix}: no notebook layer for the library's {module}")
    for leaf, value in sub.items():
      out[f"{prefix}/{module}/{leaf}"] = (f"main.{names[module]}.{_TORCH_LEAF[leaf]}", value)
  return out


def to_torch(prefix: str, params) -> dict[str, np.ndarray]:
  """One network's parameters under the notebook's names, in PyTorch's layout."""
  out = {}
  for path, (name, value) in leaves(prefix, params).items():
    value = np.asarray(value)
    module = path.split("/")[1]
    out[f"{prefix}/{name}"] = _kernel_to_torch(module, value) if value.ndim == 4 else value
  return out


def sample_index(path: str, size: int) -> np.ndarray:
  """The fixed entries (of the flattened library leaf) the golden file keeps."""
  seed = int(hashlib.sha256(f"{SEED}/{path}".encode()).hexdigest()[:8], 16)
  n = min(SAMPLE, size)
  return np.sort(np.random.default_rng(seed).choice(size, n, replace=False))


def _run(python, lagan, inputs_path, dtype, workdir):
  out = pathlib.Path(workdir) / f"{dtype}.npz"
  cmd = [python, str(DRIVER), "--lagan", str(lagan), "--inputs", str(inputs_path)]
  cmd += ["--out", str(out), "--dtype", dtype]
  got = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if got.returncode:
    raise SystemExit(f"error: the notebook run ({dtype}) failed: {got.stderr.strip()[-400:]}")
  with np.load(out) as f:
    return dict(f)


def _library_view(run, g, d) -> dict[str, np.ndarray]:
  """A run's outputs in the library's layout, its parameters sampled."""
  out = {k: v for k, v in run.items() if k.startswith(("out/", "loss/"))}
  out["out/g_z"] = run["out/g_z"].transpose(0, 2, 3, 1)  # NCHW -> NHWC
  for key in ("out/d_real", "out/d_fake"):
    out[key] = run[key].reshape(-1)
  for prefix, params in (("G", g), ("D", d)):
    for path, (name, value) in leaves(prefix, params).items():
      idx = sample_index(path, value.size)
      for what in ("grad", "after"):
        w = run[f"{what}/{prefix}/{name}"]
        w = kernel_from_torch(path.split("/")[1], w) if w.ndim == 4 else w
        out[f"{what}/{path}"] = w.reshape(-1)[idx]
        if what == "grad":
          out[f"grad_norm/{path}"] = np.asarray(np.linalg.norm(w))
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lagan", required=True, help="a checkout of LAGAN-Lookahead_Minimax")
  parser.add_argument("--python", required=True, help="an interpreter with torch")
  parser.add_argument("--out", default="tests/parity/data")
  parser.add_argument("--commit", required=True, help="the checkout's commit")
  args = parser.parse_args(argv)
  if not (pathlib.Path(args.lagan) / "mnist").is_dir():
    raise SystemExit(f"error: --lagan {args.lagan} has no mnist/ notebook folder")
  g, d, z, z2, real = inputs()
  arrays = to_torch("G", g) | to_torch("D", d)
  arrays |= {"z": np.asarray(z), "z2": np.asarray(z2)}
  arrays["real"] = np.asarray(real).transpose(0, 3, 1, 2)
  with tempfile.TemporaryDirectory() as workdir:
    path = pathlib.Path(workdir) / "inputs.npz"
    np.savez(path, **arrays)
    runs = {dt: _run(args.python, args.lagan, path, dt, workdir) for dt in ("float32", "float64")}
  r32, r64 = (_library_view(runs[dt], g, d) for dt in ("float32", "float64"))
  out_dir = pathlib.Path(args.out)
  golden = {f"f32/{k}": v.astype(np.float32) for k, v in r32.items()}
  golden |= {f"f64/{k}": v.astype(np.float32) for k, v in r64.items()}
  np.savez_compressed(out_dir / "lagan_dcgan.npz", **golden)
  gap = {k: float(np.max(np.abs(r32[k] - r64[k]))) for k in r32}
  torch_version = subprocess.run(
    [args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
  ).stdout.strip()
  sidecar = {
    "reference": "Chavdarova/LAGAN-Lookahead_Minimax",
    "reference_commit": args.commit,
    "reference_code": "mnist/LA-AltGAN+LA-ExtraGrad.ipynb: GeneratorCNN28, DiscriminatorCNN28, "
    "get_disciminator_loss, get_generator_loss, train's Adam",
    "torch": torch_version,
    "command": "python -m experiments.parity.lagan_dcgan_golden "
    + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
    "inputs_sha256": digest(arrays),
    "batch": BATCH,
    "torch_parameters": {k: list(v.shape) for k, v in arrays.items() if k[:2] in ("G/", "D/")},
    "float32_vs_float64_max_abs": gap,
  }
  (out_dir / "lagan_dcgan.json").write_text(json.dumps(sidecar, indent=2) + "\n")
  print("largest float32 vs float64 gaps:", sorted(gap.items(), key=lambda kv: -kv[1])[:5])


if __name__ == "__main__":
  main()
