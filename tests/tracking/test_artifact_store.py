"""The artifact store on its own: blobs named by their content, one copy each; resumable uploads
that refuse a wrong offset, extra bytes or a wrong hash; abandoned uploads swept."""

from __future__ import annotations

import hashlib
import os

import pytest

from corral.errors import Conflict, InvalidRequest, NotFound
from corral.tracking.artifact_store import UPLOAD_TTL_S, ArtifactStore


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(store: ArtifactStore, chunks: list[bytes], max_bytes: int | None = None) -> tuple[str, int]:
    """The chunks through a writer into a blob, as the artifact service streams them; (sha256, size)."""
    writer = store.writer(max_bytes)
    try:
        for chunk in chunks:
            writer.write(chunk)
        return writer.finish()
    finally:
        writer.discard()


def test_a_writer_names_a_blob_by_its_content_and_keeps_one_copy(tmp_path):
    store = ArtifactStore(str(tmp_path))
    first = write(store, [b"hello ", b"world"])
    assert first == (sha(b"hello world"), 11)
    assert write(store, [b"hello world"]) == first
    assert os.listdir(os.path.join(tmp_path, "blobs", first[0][:2])) == [first[0]]
    with store.open(first[0]) as f:
        f.seek(6)
        assert f.read() == b"world"
    with pytest.raises(InvalidRequest):
        write(store, [b"x" * 10], max_bytes=5)
    assert os.listdir(os.path.join(tmp_path, "tmp")) == []
    assert store.remove(first[0]) and not store.has(first[0])
    with pytest.raises(NotFound):
        store.open(first[0])


def test_an_upload_resumes_at_its_offset_and_checks_its_hash(tmp_path):
    store = ArtifactStore(str(tmp_path))
    data = os.urandom(1000)
    upload = "a" * 32
    assert store.begin(upload, sha(data), len(data), {"run_id": 1}) == 0
    assert store.append(upload, 0, [data[:400]]) == (400, None)
    assert store.begin(upload, sha(data), len(data), {"run_id": 1}) == 400  # found again where it stood
    with pytest.raises(Conflict, match="stands at byte 400"):
        store.append(upload, 300, [data[300:]])
    with pytest.raises(InvalidRequest, match="past its end"):
        store.append(upload, 400, [data[400:] + b"extra"])
    assert store.append(upload, 400, [data[400:]]) == (1000, sha(data))
    assert store.has(sha(data)) and store.upload_meta  # the upload is gone, the blob is there
    with pytest.raises(NotFound):
        store.upload_meta(upload)
    wrong = "b" * 32
    store.begin(wrong, sha(b"something else"), 3, {})
    with pytest.raises(InvalidRequest, match="do not hash"):
        store.append(wrong, 0, [b"abc"])
    assert not store.has(sha(b"abc"))


def test_uploads_untouched_for_a_week_are_swept(tmp_path):
    now = [1_000_000_000.0]
    store = ArtifactStore(str(tmp_path), clock=lambda: now[0])
    store.begin("c" * 32, sha(b"abc"), 3, {})
    store.append("c" * 32, 0, [b"a"])
    for name in os.listdir(os.path.join(tmp_path, "uploads")):
        os.utime(os.path.join(tmp_path, "uploads", name), (now[0], now[0]))
    now[0] += UPLOAD_TTL_S - 10
    assert store.sweep() == 0
    now[0] += 20
    assert store.sweep() == 2  # the bytes and what they were to be
    with pytest.raises(NotFound):
        store.upload_meta("c" * 32)
