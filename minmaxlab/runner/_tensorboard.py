"""TensorBoard event files through tensorboardX (scalars and images), and a reader.

Runs overlay in TensorBoard when they hold the same tag in sibling folders, so a
coevolution grid writes each cell as its own run (``tensorboard/cells/r0c1``, tag
``g_loss``) next to the grid means (``tensorboard``, tag ``g_loss``).
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np


class EventFileWriter:
  """Scalars and images for one TensorBoard run folder ``logdir`` (a new event file).

  Example:
    >>> w = EventFileWriter("runs/x/tensorboard")
    >>> w.scalars(100, {"g_loss": 0.7, "fid": 12.3}); w.image(100, "samples", grid); w.close()
  """

  def __init__(self, logdir: str | os.PathLike, purge_step: int | None = None):
    """``purge_step``: a resumed run's first new step; TensorBoard hides the events
    of earlier files at this step or later (they are written again)."""
    from tensorboardX import SummaryWriter  # imported lazily: protobuf runtime

    self.logdir = Path(logdir)
    self.logdir.mkdir(parents=True, exist_ok=True)
    # tensorboardX names a file by the second it was opened: a writer opened within the same
    # second (a quick resume) would truncate the previous file. A nanosecond suffix keeps both,
    # in order (TensorBoard reads a run's files sorted by name).
    self._w = SummaryWriter(
      logdir=os.fspath(self.logdir),
      flush_secs=10,
      purge_step=purge_step,
      filename_suffix=f".{time.time_ns()}",
    )

  def scalars(self, step: int, values: dict[str, float]) -> None:
    """Write every ``tag -> number`` of ``values`` at ``step`` (NaN/inf included) as one
    event: TensorBoard reads each value as the scalar ``add_scalar`` writes, and one event a
    step costs a tenth of the host time of one event a tag."""
    from tensorboardX.proto.summary_pb2 import Summary

    if values:
      summary = Summary(
        value=[Summary.Value(tag=t, simple_value=float(v)) for t, v in values.items()]
      )
      self._w._get_file_writer().add_summary(summary, int(step))  # what add_scalar calls

  def image(self, step: int, tag: str, image) -> None:
    """An image at ``step``: a ``uint8`` or ``[0, 1]`` float array ``[H, W]``/``[H, W, C]``,
    or the path of a PNG file."""
    if isinstance(image, (str, os.PathLike)):
      import matplotlib.image

      image = matplotlib.image.imread(os.fspath(image))
    x = np.asarray(image)
    if x.ndim == 2:
      x = x[..., None]
    if x.shape[-1] == 4:
      x = x[..., :3]  # PNG alpha
    if x.dtype != np.uint8:
      x = (np.clip(x, 0.0, 1.0) * 255).round().astype(np.uint8)
    self._w.add_image(tag, x, int(step), dataformats="HWC")

  def flush(self) -> None:
    self._w.flush()

  def close(self) -> None:
    self._w.close()


def _records(data: bytes):
  i = 0
  while i + 12 <= len(data):
    (n,) = struct.unpack("<Q", data[i : i + 8])
    if i + 16 + n > len(data):
      return  # a record cut short by a kill
    yield data[i + 12 : i + 12 + n]
    i += 16 + n


def read_events(path: str | os.PathLike) -> list[tuple[int, str, str, object]]:
  """``(step, tag, kind, value)`` of every summary value in an event file: ``kind``
  ``"scalar"`` (a float) or ``"image"`` (``(height, width, png_bytes)``)."""
  from tensorboardX.proto import event_pb2

  out = []
  for record in _records(Path(path).read_bytes()):
    event = event_pb2.Event.FromString(record)
    for v in event.summary.value:
      if v.HasField("image"):
        out.append(
          (
            event.step,
            v.tag,
            "image",
            (v.image.height, v.image.width, v.image.encoded_image_string),
          )
        )
      elif v.HasField("simple_value"):
        out.append((event.step, v.tag, "scalar", v.simple_value))
  return out


def read_scalars(path: str | os.PathLike) -> list[tuple[int, str, float]]:
  """``(step, tag, value)`` of the scalars in an event file."""
  return [(s, tag, v) for s, tag, kind, v in read_events(path) if kind == "scalar"]
