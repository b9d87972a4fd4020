"""The `.wandb` file's framing (LevelDB's log format, as W&B writes it) read a block at a time: records
split across blocks come back whole, a file cut short or corrupted ends at its last good record with a
warning, and a reader that stops early reads no further. The files here are framed by the format's rules
(tests/sdk/test_wandb.py reads the real wandb's files)."""

from __future__ import annotations

import builtins
import random
import struct
import warnings
import zlib

import pytest

from corral.sdk.wandb_offline import BLOCK, CHUNK, FIRST, FULL, HEADER, LAST, MIDDLE, read_records

HEAD = struct.pack("<4sHB", b":W&B", 0xBEE1, 0)


def framed(records: list[bytes]) -> bytes:
    out = bytearray(HEAD)
    for record in records:
        first, left = True, record
        while True:
            room = BLOCK - len(out) % BLOCK
            if room < CHUNK.size:
                out += b"\0" * room
                continue
            piece, left = left[:room - CHUNK.size], left[room - CHUNK.size:]
            kind = (FULL if not left else FIRST) if first else (LAST if not left else MIDDLE)
            out += CHUNK.pack(zlib.crc32(piece, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF, len(piece), kind) + piece
            first = False
            if not left:
                break
    return bytes(out)


RECORDS = [random.Random(i).randbytes(random.Random(-i).randrange(0, 90_000)) for i in range(60)]


def test_records_split_across_blocks_come_back_whole(tmp_path):
    path = tmp_path / "run.wandb"
    path.write_bytes(framed(RECORDS))
    assert path.stat().st_size > 40 * BLOCK
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(read_records(str(path))) == RECORDS


@pytest.mark.parametrize(("damage", "words"), [("cut", "truncated"), ("flip", "fails its checksum")])
def test_a_damaged_file_ends_at_its_last_good_record_with_a_warning(tmp_path, damage, words):
    whole = framed(RECORDS)
    at = len(framed(RECORDS[:30])) + 5000  # inside record 30
    data = whole[:at] if damage == "cut" else whole[:at] + bytes([whole[at] ^ 0xFF]) + whole[at + 1:]
    path = tmp_path / "run.wandb"
    path.write_bytes(data)
    with pytest.warns(UserWarning, match=words):
        assert list(read_records(str(path))) == RECORDS[:30]


def test_a_reader_that_stops_early_reads_no_further(tmp_path, monkeypatch):
    path = tmp_path / "run.wandb"
    path.write_bytes(framed(RECORDS))
    read = []
    real_open = builtins.open

    class Counted:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            data = self.f.read(n)
            read.append(len(data))
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(builtins, "open", lambda *a, **k: Counted(real_open(*a, **k)))
    records = read_records(str(path))
    assert next(records) == RECORDS[0]
    records.close()
    assert sum(read) <= 4 * BLOCK < path.stat().st_size // 10


def test_not_a_wandb_file_is_refused(tmp_path):
    path = tmp_path / "x.wandb"
    path.write_bytes(b"PK\3\4 not it")
    with pytest.raises(ValueError, match="no :W&B header"):
        list(read_records(str(path)))
    assert HEADER.size == len(HEAD)
