"""Artifacts for real, end to end against live servers: uploads in chunks, resumed after an
interruption (and after a server restart), deduplicated on disk, downloaded whole and by range,
limited in size, and refused to other users; a run's deletion frees its blobs."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest

from corral.client import Client
from corral.errors import InvalidRequest, NotFound, ServerUnavailable
from tests.conftest import DATABASES, Server, module_server


@pytest.fixture(scope="module", params=DATABASES)
def live(request: pytest.FixtureRequest) -> Iterator[Server]:
    with module_server(request.param) as server:
        yield server


def blobs(server: Server) -> list[str]:
    root = os.path.join(server.home, "artifacts", "blobs")
    return sorted(name for _, _, names in os.walk(root) for name in names)


def new_run(client: Client, **fields: object) -> dict:
    return client.create_run(project=f"p-{uuid.uuid4().hex[:8]}", **fields)


def payload(tmp_path, size: int, name: str = "data.bin") -> tuple[str, bytes]:
    data = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(data)
    return str(path), data


def download(client: Client, run: int, path: str, **kw: int) -> bytes:
    out = io.BytesIO()
    client.download_artifact(run, path, out, **kw)
    return out.getvalue()


def test_a_file_goes_up_in_chunks_and_comes_back_whole_and_by_range(live, tmp_path):
    client = live.client()
    run = new_run(client)
    source, data = payload(tmp_path, 3 * 65536 + 123)
    offsets: list[int] = []
    artifact = client.upload_artifact(run["id"], source, "model/weights.bin", type="model", chunk_bytes=65536,
                                      on_chunk=offsets.append)
    assert offsets == [65536, 131072, 196608, len(data)]
    assert artifact["stored"] and artifact["sha256"] == hashlib.sha256(data).hexdigest()
    assert artifact["size"] == len(data) and artifact["type"] == "model"
    listed = client.artifacts(run["id"])
    assert [(a["path"], a["stored"]) for a in listed] == [("model/weights.bin", True)]
    assert download(client, run["id"], "model/weights.bin") == data
    assert download(client, run["id"], "model/weights.bin", start=100, end=199) == data[100:200]
    assert download(client, run["id"], "model/weights.bin", start=len(data) - 5) == data[-5:]
    with pytest.raises(NotFound):
        download(client, run["id"], "model/other.bin")


def test_range_requests_answer_206_and_416(live, tmp_path):
    client = live.client()
    run = new_run(client)
    source, data = payload(tmp_path, 1000)
    client.upload_artifact(run["id"], source, "a.bin")
    url = urllib.parse.urlsplit(live.url)

    def get(range_header: str | None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("GET", f"/api/v1/runs/{run['id']}/artifacts/content?path=a.bin",
                     headers={"Range": range_header} if range_header else {})
        response = conn.getresponse()
        answer = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        conn.close()
        return answer

    status, headers, body = get("bytes=10-19")
    assert status == 206 and body == data[10:20] and headers["content-range"] == "bytes 10-19/1000"
    status, headers, body = get("bytes=-10")
    assert status == 206 and body == data[-10:]
    status, headers, body = get("bytes=5000-")
    assert status == 416 and headers["content-range"] == "bytes */1000"
    assert json.loads(body)["error"]["code"] == "range_not_satisfiable"
    status, headers, body = get(None)
    assert status == 200 and body == data and headers["accept-ranges"] == "bytes"
    assert headers["etag"] == f'"{hashlib.sha256(data).hexdigest()}"'


def test_an_interrupted_upload_resumes_where_it_stopped_and_leaves_one_blob(live, tmp_path):
    client = live.client()
    run = new_run(client)
    source, data = payload(tmp_path, 10 * 4096)
    before = set(blobs(live))

    class Cut(Exception):
        pass

    def cut_after_three(offset: int) -> None:
        if offset >= 3 * 4096:
            raise Cut

    with pytest.raises(Cut):
        client.upload_artifact(run["id"], source, "ckpt.bin", chunk_bytes=4096, on_chunk=cut_after_three)
    assert client.artifacts(run["id"]) == []  # nothing linked from half a file
    sent: list[int] = []
    artifact = client.upload_artifact(run["id"], source, "ckpt.bin", chunk_bytes=4096, on_chunk=sent.append)
    assert sent[0] == 4 * 4096, "the second try starts where the first stopped"
    assert len(sent) == 7
    assert artifact["sha256"] == hashlib.sha256(data).hexdigest()
    assert set(blobs(live)) - before == {artifact["sha256"]}
    assert download(client, run["id"], "ckpt.bin") == data
    assert os.listdir(os.path.join(live.home, "artifacts", "uploads")) == []


def test_an_upload_resumes_across_a_server_restart(server_factory, tmp_path):
    server = server_factory()
    client = server.client()
    run = new_run(client)
    source, data = payload(tmp_path, 8 * 4096)

    def stop_halfway(offset: int) -> None:
        if offset == 4 * 4096:
            server.stop()

    with pytest.raises(ServerUnavailable):
        client.upload_artifact(run["id"], source, "big.bin", chunk_bytes=4096, on_chunk=stop_halfway)
    server.start()
    sent: list[int] = []
    client = server.client()
    client.upload_artifact(run["id"], source, "big.bin", chunk_bytes=4096, on_chunk=sent.append)
    assert sent[0] == 5 * 4096 and download(client, run["id"], "big.bin") == data


def test_the_same_file_in_two_runs_is_one_blob_on_disk(live, tmp_path):
    client = live.client()
    source, data = payload(tmp_path, 50_000)
    first, second = new_run(client), new_run(client)
    before = set(blobs(live))
    client.upload_artifact(first["id"], source, "data.bin", chunk_bytes=16384)
    sent: list[int] = []
    again = client.upload_artifact(second["id"], source, "inputs/data.bin", chunk_bytes=16384, on_chunk=sent.append)
    assert sent == [], "the owner's content already stored costs no bytes"
    assert set(blobs(live)) - before == {again["sha256"]}
    assert download(client, second["id"], "inputs/data.bin") == data
    # deleting one run keeps the blob the other links; deleting both frees it
    client.delete_run(first["id"])
    assert again["sha256"] in blobs(live)
    assert download(client, second["id"], "inputs/data.bin") == data
    freed = client.delete_run(second["id"])
    assert freed["blobs_removed_bytes"] == len(data)
    assert again["sha256"] not in blobs(live)
    with pytest.raises(NotFound):
        client.get_run(second["id"])


def test_bad_uploads_are_refused_by_field(live, tmp_path):
    client = live.client()
    run = new_run(client)
    source, data = payload(tmp_path, 100)
    for name in ("../etc/passwd", "/abs", "a//b", "a/./b", ""):
        with pytest.raises(InvalidRequest) as refused:
            client.upload_artifact(run["id"], source, name)
        assert refused.value.field == "path"
    # a file that changed after it was hashed: refused by its hash, nothing linked
    with pytest.raises(InvalidRequest) as refused:
        client.upload_artifact(run["id"], source, "x.bin", sha256=hashlib.sha256(b"other").hexdigest())
    assert refused.value.field == "sha256"
    assert client.artifacts(run["id"]) == []


def test_size_limits_per_file_and_per_user(server_factory, tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[tracking]\nmax_artifact_mb = 1\nuser_artifact_quota_mb = 2\n")
    server = server_factory(home=home)
    client = server.client()
    run = new_run(client)
    big, _ = payload(tmp_path, (1 << 20) + 1, "big.bin")
    with pytest.raises(InvalidRequest) as refused:
        client.upload_artifact(run["id"], big, "big.bin")
    assert refused.value.field == "size" and "max_artifact_mb" in str(refused.value)
    for i in range(2):
        part, _ = payload(tmp_path, 1 << 20, f"part{i}.bin")
        client.upload_artifact(run["id"], part, f"part{i}.bin")
    last, _ = payload(tmp_path, 10, "last.bin")
    with pytest.raises(InvalidRequest) as refused:
        client.upload_artifact(run["id"], last, "last.bin")
    assert "user_artifact_quota_mb" in str(refused.value)


def test_a_registered_checkpoint_downloads_from_where_the_job_wrote_it(live, tmp_path):
    client = live.client()
    run = new_run(client)
    source, data = payload(tmp_path, 5000, "ckpt-00000010.pt")
    client.log_artifacts(run["id"], [{"path": source, "type": "checkpoint", "step": 10}])
    assert download(client, run["id"], source) == data
    assert download(client, run["id"], source, start=4990) == data[4990:]
    # a file its owner does not own is not served, whatever the server's rights; and it reads
    # exactly like one that is gone (nothing said about places the owner cannot reach)
    os.chown(source, 65534, 65534)
    with pytest.raises(NotFound) as not_theirs:
        download(client, run["id"], source)
    os.unlink(source)
    with pytest.raises(NotFound) as gone:
        download(client, run["id"], source)
    assert str(not_theirs.value) == str(gone.value)
