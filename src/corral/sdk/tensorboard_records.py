"""TensorBoard's event files read without TensorFlow: TFRecord framing and the little of protobuf they need.

An event file is a TFRecord stream (u64 length, u32 masked CRC-32C of the length, the data, u32
masked CRC-32C of the data), each record a serialized `Event`. Protobuf's wire format is read
field by field (`fields`); `tensor` decodes the TensorProto that TF2's summaries carry:

    TensorProto:  dtype = 1, tensor_shape = 2, tensor_content = 4, float_val = 5, double_val = 6,
                  int_val = 7, string_val = 8, int64_val = 10, half_val = 13 (bfloat16 too)

corral.sdk.tensorboard reads scalars with these, corral.sdk.tensorboard_media media and hparams.
"""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
# Bytes read from an event file at a time: a peek at its first events reads little more, and reading
# it all takes few system calls.
_CHUNK = 1 << 16


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def _crc32c(data: bytes | memoryview) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's checksum: CRC-32C rotated and offset, so a CRC of CRCs is not itself a CRC."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- TFRecord framing -----------------------------------------------------------------------------


def read_records(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield `(offset, data)` for each whole record of a TFRecord file, read from the file as they are
    wanted: a caller that stops after the first events (to tell a file's kind, or when it started)
    reads no further.

    The records are those of the file as long as it was when opened (a writer still appending adds
    none). A truncated tail or a corrupt length ends the file (nothing after it can be framed) and a
    record whose data fails its checksum is skipped; either way with a warning, after every whole record.
    """
    with open(path, "rb", buffering=_CHUNK) as f:
        end = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < end:
            framing = f.read(12) if end - offset >= 12 else b""
            if len(framing) < 12:  # (short of what fstat said too: the file was cut while being read)
                warn(path, offset, "truncated record header")
                return
            header = framing[:8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack_from("<I", framing, 8)
            if masked_crc32c(header) != length_crc:
                warn(path, offset, "corrupt record length")
                return
            data_end = offset + 12 + length
            # checked before reading: a corrupt length may name more bytes than the machine has
            rest = f.read(length + 4) if data_end + 4 <= end else b""
            if len(rest) < length + 4:
                warn(path, offset, "truncated record")
                return
            data = rest[:length]
            (data_crc,) = struct.unpack_from("<I", rest, length)
            if masked_crc32c(data) == data_crc:
                yield offset, data
            else:
                warn(path, offset, "record fails its checksum, skipped")
            offset = data_end + 4


def warn(path: str, offset: int, what: str) -> None:
    warnings.warn(f"{path}: {what} at byte {offset}; the records before it were read", stacklevel=3)


# -- protobuf, the little that events need --------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint too long")


def fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """Yield `(field number, wire type, value)`: int for varints and fixed widths, bytes otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value = buf[pos:pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value = buf[pos:pos + size]
            pos += size
        elif wire == 5:
            value = buf[pos:pos + 4]
            pos += 4
        else:  # groups (3, 4) are not in any message read here
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("field runs past the end of its message")
        yield number, wire, value


def int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _bfloat16(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def _half(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def double(value: bytes) -> float:
    """A fixed-width double field (wire type 1)."""
    return struct.unpack("<d", value)[0]


def text(value: bytes) -> str:
    return bytes(value).decode("utf-8", "replace")


# TensorFlow dtype → (struct code of tensor_content, its repeated field, decoder of a varint element;
# None for the fixed-width float and double fields)
FLOAT, DOUBLE, INT32, STRING, INT64, BFLOAT16, HALF = 1, 2, 3, 7, 9, 14, 19
_DTYPES: dict[int, tuple[str, int, Any]] = {
    FLOAT: ("f", 5, None),
    DOUBLE: ("d", 6, None),
    INT32: ("i", 7, _int32),
    INT64: ("q", 10, int64),
    BFLOAT16: ("H", 13, _bfloat16),
    HALF: ("e", 13, _half),
}


def _repeated(wire: int, value: Any, scalar_code: str | None, element: Any) -> list[float]:
    """Elements of a repeated numeric field, packed (one length-delimited run) or not."""
    if scalar_code is not None:  # fixed-width floats
        size = struct.calcsize(scalar_code)
        if wire == 2:
            return list(struct.unpack(f"<{len(value) // size}{scalar_code}", value[: len(value) // size * size]))
        return [struct.unpack("<" + scalar_code, value)[0]]
    if wire == 2:
        out, pos = [], 0
        while pos < len(value):
            raw, pos = _varint(value, pos)
            out.append(element(raw))
        return out
    return [element(value)]


def _shape(buf: bytes) -> list[int]:
    """The sizes of a TensorShapeProto's dims (dim = 2, each with size = 1)."""
    sizes = []
    for number, wire, dim in fields(buf):
        if number == 2 and wire == 2:
            size = 0
            for dnum, dwire, value in fields(dim):
                if dnum == 1 and dwire == 0:
                    size = int64(value)
            sizes.append(size)
    return sizes


class Tensor(NamedTuple):
    """A decoded TensorProto: its dtype, its shape ([] for a scalar) and its elements, flat, in
    row-major order (floats for numbers, bytes for strings)."""

    dtype: int
    shape: list[int]
    values: list[Any]

    @property
    def size(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


def tensor(buf: bytes) -> Tensor | None:
    """A TensorProto's dtype, shape and elements; None for a dtype other than numbers and strings."""
    dtype, content, shape = 0, b"", []
    parsed = list(fields(buf))
    for number, wire, value in parsed:
        if number == 1 and wire == 0:
            dtype = value
        elif number == 2 and wire == 2:
            shape = _shape(value)
        elif number == 4 and wire == 2:
            content = value
    if dtype == STRING:
        return Tensor(dtype, shape, [bytes(v) for number, wire, v in parsed if number == 8 and wire == 2])
    if dtype not in _DTYPES:
        return None
    code, field, element = _DTYPES[dtype]
    values: list[Any] = []
    if content:
        if dtype == BFLOAT16:
            values = [_bfloat16(v) for v in struct.unpack(f"<{len(content) // 2}H", content)]
        else:
            size = struct.calcsize(code)
            values = list(struct.unpack(f"<{len(content) // size}{code}", content[: len(content) // size * size]))
    else:
        fixed = code if element is None else None  # float_val and double_val are fixed-width
        for number, wire, value in parsed:
            if number == field:
                values += _repeated(wire, value, fixed, element)
    return Tensor(dtype, shape, values)
