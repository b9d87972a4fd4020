"""What of a sizing fits on the server asked: a 70B model to train on a 4×A100 box is said not to fit there,
with what does (LoRA, inference, the largest model that trains in full); one that fits names the GPUs to ask for."""

from __future__ import annotations

import pytest

from corral.core.scheduling.sizing import estimate
from corral.core.scheduling.sizing_here import fit_here, gpu_groups, largest_trainable, recommend_here
from corral.errors import InvalidRequest

B = 10**9
FOUR_A100 = gpu_groups([("vm", [("A100", 81920)] * 4)])


def test_a_model_too_big_for_this_server_is_said_so_with_what_fits_here():
    here = fit_here(estimate(70 * B, "train"), FOUR_A100)
    assert here.fits is None
    assert here.lines[0] == ("This server cannot run it: the most GPU memory one job can have here is vm's 4×A100 "
                             "(80 GB each), ~288 GB usable of the ~1344 GB it needs.")
    assert here.lines[1] == ("What fits here: lora in bf16 (~181 GB: --gpus 4 on vm); inference in bf16 (~168 GB: "
                             "--gpus 4 on vm); full training (bf16) of a model of up to ~15B parameters.")
    assert [(a.mode, a.precision, a.gpus) for a in here.alternatives] == [("lora", "bf16", 4), ("inference", "bf16", 4)]
    assert here.to_dict()["largest"] == {"node": "vm", "gpu_type": "A100", "gpu_mem_gb": 80.0, "gpus": 4,
                                         "usable_gb": 288.0}


def test_a_model_that_fits_names_the_gpus_to_ask_for_on_the_fewest_that_hold_it():
    mixed = gpu_groups([("big", [("T4", 16384)] * 2 + [("A100", 81920)] * 8), ("small", [("A100", 40960)] * 4)])
    here = fit_here(estimate(7 * B, "train"), mixed)
    assert here.fits is not None and (here.fits.group.node, here.fits.gpus) == ("big", 2)
    assert here.lines == ("This server runs it: 2 GPUs of big's 8×A100 (80 GB each), --gpus 2 --gpu-type A100",)


def test_a_served_model_is_offered_a_lower_precision_and_a_server_without_gpus_says_so():
    served = fit_here(estimate(400 * B, "inference"), FOUR_A100)
    assert served.lines[1] == "What fits here: inference in int4 (~240 GB: --gpus 4 on vm)."
    assert fit_here(estimate(7 * B), gpu_groups([("cpu-only", [])])).lines == (
        "This server cannot run it: it has no GPUs.",)


@pytest.mark.parametrize(("usable_gb", "params"), [(288.0, 15 * B), (72.0, 3_700_000_000), (1.0, None)])
def test_the_largest_model_that_trains_here_is_read_from_its_usable_memory(usable_gb, params):
    group = gpu_groups([("n", [("X", int(usable_gb / 0.9 * 1024))])])[0]
    assert largest_trainable(group) == params


@pytest.mark.parametrize("word", ["full", "FULL", "training", "pretrain"])
def test_full_and_other_words_for_training_are_train(word):
    assert estimate(7 * B, word).mode == "train"
    assert recommend_here("7B", word, "bf16", None, None)["mode"] == "train"


def test_an_unknown_mode_still_names_the_field_and_the_modes():
    with pytest.raises(InvalidRequest) as refused:
        recommend_here("7B", "diffusion", "bf16", None, [])
    assert (refused.value.field, refused.value.hint) == ("mode", "use one of train, finetune, lora, inference")
