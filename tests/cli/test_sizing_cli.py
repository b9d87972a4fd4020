"""`corral recommend`, in-process with click's CliRunner: computed locally, no server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from corral.cli.sizing import recommend


def invoke(*args: str):
    return CliRunner().invoke(recommend, list(args))


def test_recommend_prints_the_recommendation_then_the_arithmetic():
    result = invoke("--params", "7B")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "7B parameters, train in bf16: 2×A100-80G on 1 node (~134.4 GB of GPU memory)"
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
    (["--params", "7B", "--mode", "pretrain"], "'--mode'", "train"),
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
