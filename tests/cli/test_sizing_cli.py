"""`corral recommend`, in-process with click's CliRunner: computed locally; with no server found it says that
what runs here is not checked, and against a live server it says whether that server runs it, or what does."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.cli.sizing import NO_SERVER, recommend


@pytest.fixture(autouse=True)
def no_server(tmp_path, monkeypatch):
    """A home no server announced itself in (and no shared service): `recommend` asks nobody."""
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "no-server"))
    monkeypatch.delenv("CORRAL_URL", raising=False)


def invoke(*args: str):
    return CliRunner().invoke(recommend, list(args))


def test_recommend_prints_the_recommendation_then_the_arithmetic():
    result = invoke("--params", "7B")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "7B parameters, train in bf16: 2×A100-80G on 1 node (~134.4 GB of GPU memory)"
    assert lines[1] == NO_SERVER
    assert "  Adam states: 7B × 8 bytes (fp32 m and v) = 56.0 GB" in lines
    assert lines[-1] == "  seed table: 1–7B → 1–4×A100-80G"


def test_recommend_json_carries_the_numbers_and_the_arithmetic():
    result = invoke("--params", "13B", "--mode", "finetune", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["gpus"], data["gpu_type"], data["nodes"], data["recommendation"]) == (4, "A100-80G", 1, "4×A100-80G")
    assert data["total_gb"] == 249.6
    assert data["arithmetic"][0] == "weights: 13B × 2 bytes (bf16) = 26.0 GB"


def test_recommend_takes_mode_precision_and_a_forced_gpu_type():
    result = invoke("--params", "70B", "--mode", "LoRA", "--precision", "int4", "--gpu-type", "L40S")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("70B parameters, lora in int4: 2×L40S on 1 node")


@pytest.mark.parametrize(("args", "option", "text"), [
    (["--params", "7"], "'--params'", "did you mean 7B?"),
    (["--params", "lots"], "'--params'", "use a count such as 350M, 7B or 1.5T"),
    (["--params", "7B", "--precision", "int4"], "'--precision'", "int4 is for lora and inference only, not train"),
    (["--params", "7B", "--gpu-type", "TPU"], "'--gpu-type'", "known: T4, V100-16G"),
    (["--params", "7B", "--gpu-type", "A100"], "'--gpu-type'", "say A100-40G or A100-80G"),
    (["--params", "7B", "--mode", "diffusion"], "'--mode'", "use one of train, finetune, lora, inference"),
    (["--params", "7B", "--precision", "fp8", "--gpu-type", "A100-80G"], "'--precision'", "fp8 needs FP8"),
])
def test_bad_values_are_usage_errors_naming_the_option(args, option, text):
    result = invoke(*args)
    assert result.exit_code == 2
    assert f"Invalid value for {option}" in result.output
    assert text in result.output


def test_params_is_required():
    result = invoke("--mode", "train")
    assert result.exit_code == 2
    assert "--params" in result.output


def test_on_a_4x_a100_server_a_70b_training_is_said_not_to_run_here_with_what_does(server_factory):
    server = server_factory()  # one node of 4 declared A100s of 80 GB
    result = CliRunner().invoke(cli, ["--home", server.home, "recommend", "--params", "70B", "--mode", "full"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "70B parameters, train in bf16: 24×H100-80G on 3 nodes (~1344.0 GB of GPU memory)"
    node = server.client().nodes()[0]["name"]
    assert lines[1] == (f"This server cannot run it: the most GPU memory one job can have here is {node}'s 4×A100 "
                        "(80 GB each), ~288 GB usable of the ~1344 GB it needs.")
    assert lines[2].startswith(f"What fits here: lora in bf16 (~181 GB: --gpus 4 on {node}); inference in bf16")
    assert lines[2].endswith("full training (bf16) of a model of up to ~15B parameters.")
    fits = CliRunner().invoke(cli, ["--home", server.home, "recommend", "--params", "7B", "--json"])
    here = json.loads(fits.output)["here"]
    assert here["fits"] and here["placement"]["gpus"] == 2 and here["lines"][0].startswith("This server runs it: 2 GPUs")
    api = server.client()._request("GET", "/api/v1/recommend?params=70B&mode=full")
    assert api["mode"] == "train" and api["here"]["fits"] is False and api["here"]["lines"] == lines[1:3]
