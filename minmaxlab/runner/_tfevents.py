"""A small, protobuf-free writer (and reader) of TensorBoard scalar event files.

TensorBoard reads ``events.out.tfevents.*`` files: a sequence of TFRecords
(``uint64 length | uint32 masked_crc32c(length) | data | uint32
masked_crc32c(data)``, little endian) whose data are serialised ``Event``
protocol buffers. Scalars need only four fields, so we encode them by hand
instead of depending on ``tensorboardX``/``tensorboard`` and a protobuf
runtime: about 100 lines, no import cost, and the framing is checked in the
tests against an independent CRC-32C. The encoded messages::

  Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
            Summary summary = 5; }
  Summary { repeated Value value = 1; }
  Value   { string tag = 1; float simple_value = 2; }
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path


def _crc32c_table() -> list[int]:
  table = []
  for i in range(256):
    c = i
    for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
  return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
  """CRC-32C (Castagnoli), as used by TFRecord."""
  c = 0xFFFFFFFF
  for b in data:
    c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
  return c ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
  c = crc32c(data)
  return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
  n &= (1 << 64) - 1  # int64 two's complement, as protobuf does
  out = bytearray()
  while True:
    b = n & 0x7F
    n >>= 7
    if n:
      out.append(b | 0x80)
    else:
      out.append(b)
      return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_event(
  wall_time: float,
  step: int,
  *,
  file_version: str | None = None,
  scalars: dict[str, float] | None = None,
) -> bytes:
  """Serialise one ``Event`` with optional file version and scalar values."""
  out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(int(step))
  if file_version is not None:
    out += _field_bytes(3, file_version.encode())
  if scalars:
    summary = b""
    for tag, value in scalars.items():
      v = _field_bytes(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", float(value))
      summary += _field_bytes(1, v)
    out += _field_bytes(5, summary)
  return out


def _record(data: bytes) -> bytes:
  header = struct.pack("<Q", len(data))
  return (
    header
    + struct.pack("<I", masked_crc32c(header))
    + data
    + struct.pack("<I", masked_crc32c(data))
  )


class EventFileWriter:
  """Append scalar summaries to a new TensorBoard event file in ``logdir``.

  Example:
    >>> w = EventFileWriter("runs/x/tb")
    >>> w.scalars(100, {"loss/min": 0.7, "fid": 12.3}); w.close()
  """

  def __init__(self, logdir: str | os.PathLike):
    self.logdir = Path(logdir)
    self.logdir.mkdir(parents=True, exist_ok=True)
    name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}"
    self.path = self.logdir / name
    self._f = open(self.path, "ab")
    self._f.write(_record(encode_event(time.time(), 0, file_version="brain.Event:2")))
    self._f.flush()

  def scalars(self, step: int, values: dict[str, float]) -> None:
    """Write one event holding all ``values`` (tag -> number) at ``step``."""
    if values:
      self._f.write(_record(encode_event(time.time(), step, scalars=values)))

  def flush(self) -> None:
    self._f.flush()

  def close(self) -> None:
    if not self._f.closed:
      self._f.close()


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
  shift = n = 0
  while True:
    b = buf[i]
    i += 1
    n |= (b & 0x7F) << shift
    shift += 7
    if not b & 0x80:
      return n, i


def _fields(buf: bytes):
  i = 0
  while i < len(buf):
    key, i = _read_varint(buf, i)
    number, wire = key >> 3, key & 7
    if wire == 0:
      value, i = _read_varint(buf, i)
    elif wire == 1:
      value, i = buf[i : i + 8], i + 8
    elif wire == 5:
      value, i = buf[i : i + 4], i + 4
    elif wire == 2:
      n, i = _read_varint(buf, i)
      value, i = buf[i : i + n], i + n
    else:
      raise ValueError(f"unsupported protobuf wire type {wire}")
    yield number, wire, value


def read_scalars(path: str | os.PathLike) -> list[tuple[int, str, float]]:
  """Read ``(step, tag, value)`` scalars back from an event file (checks CRCs)."""
  data = Path(path).read_bytes()
  out, i = [], 0
  while i < len(data):
    header = data[i : i + 8]
    (n,) = struct.unpack("<Q", header)
    if struct.unpack("<I", data[i + 8 : i + 12])[0] != masked_crc32c(header):
      raise ValueError(f"{path}: corrupt record length at byte {i}")
    body = data[i + 12 : i + 12 + n]
    if struct.unpack("<I", data[i + 12 + n : i + 16 + n])[0] != masked_crc32c(body):
      raise ValueError(f"{path}: corrupt record at byte {i}")
    i += 16 + n
    step = 0
    for number, _, value in _fields(body):
      if number == 2:
        step = value - (1 << 64) if value >= 1 << 63 else value
      elif number == 5:
        for _, _, v in _fields(value):
          tag, simple = None, None
          for num, _, x in _fields(v):
            if num == 1:
              tag = x.decode()
            elif num == 2:
              simple = struct.unpack("<f", x)[0]
          out.append((step, tag, simple))
  return out
