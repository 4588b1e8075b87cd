"""The host a measurement ran on (benchmarks record it next to their numbers)."""

import platform


def cpu_model() -> str:
  """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` knows."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def cpu_has_avx512() -> bool:
  """Whether the CPU has AVX-512 (Linux /proc/cpuinfo): XLA's CPU kernels round differently
  with it, so bit-level results and retrained networks differ from an AVX2 host's."""
  try:
    with open("/proc/cpuinfo") as f:
      return "avx512f" in f.read()
  except OSError:
    return False
