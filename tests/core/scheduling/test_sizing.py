"""GPU sizing: the memory a model needs, the GPUs that hold it, and agreement with the seed table."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.sizing import (
    AUTO_TYPES, CATALOGUE, MODES, PRECISIONS, TIERS, USABLE_FRACTION, estimate, format_estimate, format_params,
    gpu_model, gpus_needed, parse_params, round_gpu_count, tier_for, undersized,
)
from corral.errors import InvalidRequest

B = 10**9
M = 10**6
PARAMS_HINT = "use a count such as 350M, 7B or 1.5T"


# -- parameter counts ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "count"), [
    ("7B", 7 * B), ("7b", 7 * B), ("1.5B", 1_500_000_000), ("350M", 350 * M), ("125m", 125 * M),
    ("70e9", 70 * B), ("7000000000", 7 * B), ("1.2T", 1_200_000_000_000), (" 13B ", 13 * B), ("0.5B", 500 * M),
    ("6.7B", 6_700_000_000), ("1.5e9", 1_500_000_000), ("500K", 500_000),
])
def test_parse_params_reads_counts_people_write(text, count):
    assert parse_params(text) == count


@pytest.mark.parametrize("text", ["", "seven", "7X", "7 GB", "-7B", "0", "0B", "1e400", "7B7", "\u0667B", "B"])
def test_parse_params_rejects_what_is_not_a_count_naming_params_and_the_fix(text):
    with pytest.raises(InvalidRequest) as info:
        parse_params(text)
    assert info.value.field == "params"
    assert info.value.hint == PARAMS_HINT


def test_a_bare_small_number_is_taken_for_a_forgotten_unit():
    with pytest.raises(InvalidRequest, match="did you mean 7B"):
        parse_params("7")


@pytest.mark.parametrize(("count", "text"), [
    (7 * B, "7B"), (1_500_000_000, "1.5B"), (350 * M, "350M"), (175 * B, "175B"), (1_200_000_000_000, "1.2T"),
])
def test_format_params_is_short_and_reads_back(count, text):
    assert format_params(count) == text
    assert parse_params(text) == count


# -- the arithmetic ------------------------------------------------------------------------------


def test_7b_training_in_bf16_shows_the_zero_accounting_line_by_line():
    e = estimate(7 * B, "train", "bf16")
    assert e.arithmetic == (
        "weights: 7B × 2 bytes (bf16) = 14.0 GB",
        "gradients: 7B × 2 bytes = 14.0 GB",
        "Adam states: 7B × 8 bytes (fp32 m and v) = 56.0 GB",
        "fp32 master weights: 7B × 4 bytes = 28.0 GB",
        "activations and workspace: +20% = 22.4 GB",
        "total 134.4 GB; 80 GB per A100-80G at 90% usable → 2 GPUs (sharded with FSDP/ZeRO-3)",
        "seed table: 1–7B → 1–4×A100-80G",
    )
    assert (e.weights_gb, e.gradients_gb, e.optimizer_gb, e.master_weights_gb, e.activations_gb, e.total_gb) == (
        14.0, 14.0, 56.0, 28.0, 22.4, 134.4)
    assert (e.gpus, e.gpu_type, e.gpu_mem_gb, e.nodes) == (2, "A100-80G", 80, 1)


@pytest.mark.parametrize("precision", ["bf16", "fp16", "fp32", "tf32", "fp8"])
@pytest.mark.parametrize("mode", ["train", "finetune"])
def test_full_training_costs_16_bytes_per_parameter_before_activations(mode, precision):
    # ZeRO: 2 + 2 + 12 in mixed precision; 4 + 4 + 8 in fp32, whose weights are their own master copy
    e = estimate(10 * B, mode, precision)
    state_gb = e.weights_gb + e.gradients_gb + e.optimizer_gb + e.master_weights_gb
    assert state_gb == pytest.approx(160.0)
    assert e.total_gb == pytest.approx(160.0 * 1.2)


def test_fp32_training_has_no_separate_master_copy():
    e = estimate(7 * B, "train", "fp32")
    assert e.master_weights_gb == 0
    assert e.weights_gb == 28.0
    assert "fp32 master weights: none, the fp32 weights are the master copy" in e.arithmetic


def test_lora_holds_frozen_weights_and_trains_one_percent_at_16_bytes():
    e = estimate(7 * B, "lora", "bf16")
    assert (e.weights_gb, e.adapters_gb, e.gradients_gb, e.optimizer_gb) == (14.0, 1.12, 0, 0)
    assert e.total_gb == pytest.approx((14.0 + 1.12) * 1.2)
    assert any(line.startswith("LoRA adapters: 1% of 7B = 70M trained × 16 bytes") for line in e.arithmetic)
    assert (e.gpus, e.gpu_type) == (1, "A100-40G")


def test_qlora_in_int4_needs_a_quarter_of_the_weight_memory():
    bf16 = estimate(70 * B, "lora", "bf16")
    int4 = estimate(70 * B, "lora", "int4")
    assert int4.weights_gb == bf16.weights_gb / 4 == 35.0
    assert int4.gpus < bf16.gpus


@pytest.mark.parametrize(("precision", "weights_gb"), [("bf16", 140.0), ("fp8", 70.0), ("int8", 70.0), ("int4", 35.0)])
def test_inference_is_the_weights_plus_20_percent(precision, weights_gb):
    e = estimate(70 * B, "inference", precision)
    assert e.weights_gb == weights_gb
    assert e.total_gb == pytest.approx(weights_gb * 1.2)
    assert e.gradients_gb == e.optimizer_gb == e.master_weights_gb == e.adapters_gb == 0


@pytest.mark.parametrize("precision", ["int8", "int4"])
@pytest.mark.parametrize("mode", ["train", "finetune"])
def test_quantized_precisions_are_refused_for_full_training_with_the_allowed_ones(mode, precision):
    with pytest.raises(InvalidRequest) as info:
        estimate(7 * B, mode, precision)
    assert info.value.field == "precision"
    assert info.value.hint == f"for {mode} use one of fp32, tf32, bf16, fp16, fp8"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"mode": "diffusion"}, "mode"), ({"precision": "fp64"}, "precision"), ({"gpu_type": "TPU-v5"}, "gpu_type"),
])
def test_unknown_values_name_their_field_and_list_the_known_ones(kwargs, field):
    with pytest.raises(InvalidRequest) as info:
        estimate(7 * B, **kwargs)
    assert info.value.field == field
    assert info.value.hint and ("use one of" in info.value.hint or "H100-80G" in info.value.hint)


def test_mode_and_precision_are_case_insensitive():
    assert estimate(7 * B, "Train", "BF16") == estimate(7 * B, "train", "bf16")


# -- GPU count and type --------------------------------------------------------------------------


@pytest.mark.parametrize(("needed", "count"), [(1, 1), (2, 2), (3, 4), (5, 8), (8, 8), (9, 16), (17, 24), (24, 24)])
def test_gpu_counts_round_up_to_powers_of_two_then_whole_nodes(needed, count):
    assert round_gpu_count(needed) == count


def test_a_model_that_exactly_fills_its_gpus_needs_no_extra_one():
    assert gpus_needed(72.0, 80) == 1
    assert gpus_needed(72.1, 80) == 2


@pytest.mark.parametrize(("params", "gpus", "gpu_type"), [
    (350 * M, 1, "A100-40G"),  # <1B → 1×A100-40G
    (7 * B, 2, "A100-80G"),  # 1–7B → 1–4×A100-80G
    (13 * B, 4, "A100-80G"),  # 7–13B → 4–8×A100-80G
    (8 * B, 4, "A100-80G"),  # memory says 3; the row starts at 4
])
def test_training_recommendations_match_the_seed_table(params, gpus, gpu_type):
    e = estimate(params)
    assert (e.gpus, e.gpu_type) == (gpus, gpu_type)


def test_70b_trains_on_at_least_a_node_of_h100s_and_175b_on_two():
    e70, e175 = estimate(70 * B), estimate(175 * B)
    assert e70.gpu_type == e175.gpu_type == "H100-80G"
    assert e70.gpus >= 8 and e175.gpus >= 16
    assert e70.gpus == 24 and e70.nodes == 3  # 1344 GB over 72 usable GB → 19 → three whole nodes
    assert "→ 19 GPUs, rounded up to 24: 3 whole nodes of 8" in e70.arithmetic[-2]


def test_the_table_floor_is_shown_when_it_raises_the_count():
    e = estimate(8 * B)
    assert "→ 3 GPUs by memory, 4 by the seed table's floor for 7–13B" in e.arithmetic[-2]


@pytest.mark.parametrize(("params", "row"), [
    (999_999_999, "<1B"), (1 * B, "1–7B"), (7 * B, "1–7B"), (7 * B + 1, "7–13B"), (13 * B, "7–13B"),
    (70 * B, "13–70B"), (70 * B + 1, ">70B"),
])
def test_table_rows_include_their_upper_bound(params, row):
    assert tier_for(params).params == row


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1 * M, max_value=2_000 * B), st.sampled_from(["train", "finetune"]),
       st.sampled_from(["bf16", "fp16", "fp32"]))
def test_training_always_lands_in_its_table_row_and_holds_the_model(params, mode, precision):
    e = estimate(params, mode, precision)
    row = tier_for(params)
    assert e.tier == row
    assert e.gpu_type == row.gpu_type
    assert e.gpus >= row.min_gpus
    assert row.max_gpus is None or e.gpus <= row.max_gpus
    assert e.gpus * e.gpu_mem_gb * USABLE_FRACTION >= e.total_gb
    assert e.nodes == -(-e.gpus // 8)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1 * M, max_value=2_000 * B), st.integers(min_value=1 * M, max_value=2_000 * B),
       st.sampled_from(MODES))
def test_a_bigger_model_never_gets_fewer_gpus(a, b, mode):
    small, big = sorted((a, b))
    assert estimate(small, mode, "bf16").gpus <= estimate(big, mode, "bf16").gpus


@pytest.mark.parametrize("params", [7 * B, 34 * B, 70 * B, 175 * B, 405 * B])
@pytest.mark.parametrize("mode", ["lora", "inference"])
def test_lora_and_inference_take_the_smallest_gpu_of_those_needing_fewest(params, mode):
    e = estimate(params, mode, "bf16")
    counts = {name: round_gpu_count(gpus_needed(e.total_gb, CATALOGUE[name].mem_gb)) for name in AUTO_TYPES}
    fewest = min(counts.values())
    assert e.gpus == fewest
    assert e.gpu_type == next(name for name in AUTO_TYPES if counts[name] == fewest)
    assert any(line.startswith("choice: the fewest GPUs, then the smallest:") for line in e.arithmetic)


def test_70b_inference_fits_two_h200s_rather_than_four_80g_gpus():
    e = estimate(70 * B, "inference", "bf16")
    assert (e.gpus, e.gpu_type) == (2, "H200-141G")


def test_a_forced_gpu_type_sets_the_type_and_the_count_follows_memory():
    e = estimate(7 * B, "train", "bf16", "RTX 4090")
    assert (e.gpu_type, e.gpu_mem_gb) == ("RTX-4090", 24)
    assert e.gpus == 8  # 134.4 GB over 21.6 usable GB → 7 → 8
    assert estimate(13 * B, "train", "bf16", "h200").gpus == 2  # memory decides, not the A100 row's floor of 4


@pytest.mark.parametrize(("name", "canonical"), [
    ("H100", "H100-80G"), ("h100-80gb", "H100-80G"), ("A100_40GB", "A100-40G"), ("a100-80g", "A100-80G"),
    ("H200", "H200-141G"), ("RTX-4090", "RTX-4090"), ("L40S", "L40S"), ("A10G", "A10G"), ("V100", "V100"),
])
def test_gpu_types_are_read_the_ways_people_write_them(name, canonical):
    assert gpu_model(name).name == canonical


def test_a_bare_a100_is_ambiguous_and_says_which_to_write():
    with pytest.raises(InvalidRequest) as info:
        gpu_model("A100")
    assert (info.value.field, info.value.hint) == ("gpu_type", "say A100-40G or A100-80G")


def test_fp8_runs_only_on_gpus_with_fp8_tensor_cores():
    with pytest.raises(InvalidRequest) as info:
        estimate(7 * B, "train", "fp8", "A100-80G")
    assert info.value.field == "precision"
    assert estimate(7 * B, "train", "fp8").gpu_type == "H100-80G"
    assert estimate(350 * M, "train", "fp8").gpu_type == "H100-80G"
    assert estimate(7 * B, "inference", "fp8").gpu_type in ("H100-80G", "H200-141G")


# -- the submit-time warning ---------------------------------------------------------------------


def test_undersized_warns_with_the_estimate_and_the_count_that_would_do():
    assert undersized(7 * B, "train", "bf16", 1, 80 * 1024) == (
        "the job declares a 7B model (train, bf16): ~134 GB of GPU memory, but asks for 1×80 GB; "
        "try --gpus 2 (corral recommend --params 7B --mode train --precision bf16)")


@pytest.mark.parametrize(("params", "mode", "precision", "gpus", "gpu_mem_mb"), [
    (7 * B, "train", "bf16", 2, 80 * 1024),
    (7 * B, "lora", "bf16", 1, 40 * 1024),
    (70 * B, "inference", "bf16", 2, None),  # 168 GB fits two of the largest GPUs
    (70 * B, "lora", "int4", 1, 80 * 1024),
])
def test_undersized_is_silent_when_the_request_holds_the_model(params, mode, precision, gpus, gpu_mem_mb):
    assert undersized(params, mode, precision, gpus, gpu_mem_mb) is None


def test_undersized_without_gpu_memory_warns_only_when_no_gpu_could_do():
    warning = undersized(7 * B, "train", "bf16", 1, None)
    assert warning is not None and "1 GPU of unstated memory" in warning and "--gpus 2 --gpu-mem 80G" in warning
    assert "asks for no GPUs" in undersized(70 * B, "inference", "bf16", 0, None)


def test_undersized_suggests_a_count_for_the_jobs_own_gpu_size():
    warning = undersized(70 * B, "train", "bf16", 8, 80 * 1024)
    assert "asks for 8×80 GB; try --gpus 24 " in warning
    assert "try --gpus 4 " in undersized(13 * B, "finetune", "bf16", 1, 80 * 1024)


def test_undersized_checks_its_inputs_as_estimate_does():
    with pytest.raises(InvalidRequest) as info:
        undersized(7 * B, "train", "int4", 1, 80 * 1024)
    assert info.value.field == "precision"


# -- output --------------------------------------------------------------------------------------


def test_format_estimate_puts_the_recommendation_first_then_the_arithmetic():
    e = estimate(7 * B)
    lines = format_estimate(e).splitlines()
    assert lines[0] == "7B parameters, train in bf16: 2×A100-80G on 1 node (~134.4 GB of GPU memory)"
    assert [line.strip() for line in lines[2:]] == list(e.arithmetic)


def test_to_dict_is_json_with_the_recommendation_and_the_table_row():
    data = json.loads(json.dumps(estimate(13 * B).to_dict()))
    assert data["recommendation"] == "4×A100-80G"
    assert data["tier"] == {"params": "7–13B", "up_to": 13 * B, "gpu_type": "A100-80G", "min_gpus": 4,
                            "max_gpus": 8, "gpus": "4–8×A100-80G"}
    assert data["arithmetic"][-1] == "seed table: 7–13B → 4–8×A100-80G"


def test_the_table_rows_and_precisions_read_as_documented():
    assert [t.gpus for t in TIERS] == ["1×A100-40G", "1–4×A100-80G", "4–8×A100-80G", "8+×H100-80G", "16+×H100-80G"]
    assert set(PRECISIONS) == {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"}
