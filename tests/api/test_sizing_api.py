"""GET /api/v1/recommend on a bare app with corral's error handlers: the same estimate as the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient

from corral.api.errors import install_error_handlers
from corral.api.sizing import router
from corral.cli.sizing import recommend


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router)
    return TestClient(app)


def test_recommend_answers_the_estimate_as_json(client):
    response = client.get("/api/v1/recommend", params={"params": "7B"})
    assert response.status_code == 200
    data = response.json()
    assert (data["gpus"], data["gpu_type"], data["gpu_mem_gb"], data["nodes"]) == (2, "A100-80G", 80, 1)
    assert (data["mode"], data["precision"], data["params"], data["total_gb"]) == ("train", "bf16", 7 * 10**9, 134.4)
    assert data["tier"]["gpus"] == "1–4×A100-80G"
    assert data["arithmetic"][-2] == (
        "total 134.4 GB; 80 GB per A100-80G at 90% usable → 2 GPUs (sharded with FSDP/ZeRO-3)")


@pytest.mark.parametrize("query", [
    {"params": "7B"},
    {"params": "70B", "mode": "inference", "precision": "fp8"},
    {"params": "13B", "mode": "lora", "precision": "int4", "gpu_type": "RTX-4090"},
    {"params": "175B", "mode": "finetune", "precision": "fp32"},
])
def test_the_api_and_the_cli_give_the_same_estimate(client, query, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))  # the CLI finds no server; the bare app has no nodes
    args = ["--params", query["params"], "--json"]
    for key in ("mode", "precision", "gpu_type"):
        if key in query:
            args += [f"--{key.replace('_', '-')}", query[key]]
    cli = CliRunner().invoke(recommend, args)
    assert cli.exit_code == 0, cli.output
    assert client.get("/api/v1/recommend", params=query).json() == json.loads(cli.output)


@pytest.mark.parametrize(("query", "field", "hint"), [
    ({"params": "seven"}, "params", "use a count such as 350M, 7B or 1.5T"),
    ({"params": "7B", "mode": "diffusion"}, "mode", "use one of train, finetune, lora, inference"),
    ({"params": "7B", "precision": "int8"}, "precision", "for train use one of fp32, tf32, bf16, fp16, fp8"),
    ({"params": "7B", "gpu_type": "A100"}, "gpu_type", "say A100-40G or A100-80G"),
])
def test_bad_values_answer_422_naming_the_field_and_the_fix(client, query, field, hint):
    response = client.get("/api/v1/recommend", params=query)
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["field"], error["hint"]) == ("invalid", field, hint)


def test_params_is_required(client):
    response = client.get("/api/v1/recommend")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "params"
