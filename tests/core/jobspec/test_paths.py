"""sbatch filename patterns: checked at submit, filled in per job."""

from __future__ import annotations

import os

import pytest

from corral.core.jobspec.paths import check_pattern, expand_pattern
from corral.errors import InvalidRequest

WORKDIR = "/home/alice/project"


def expand(pattern: str, **overrides) -> str:
    values = dict(job_id=42, name="train", user="alice", node="gpu01", workdir=WORKDIR)
    values.update(overrides)
    return expand_pattern(pattern, **values)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("/logs/%j.out", "/logs/42.out"),
        ("/logs/%J.out", "/logs/42.out"),
        ("/logs/%x.out", "/logs/train.out"),
        ("/logs/%u.out", "/logs/alice.out"),
        ("/logs/%N.out", "/logs/gpu01.out"),
        ("/logs/%A.out", "/logs/42.out"),  # not an array job: %A is the job id, as in Slurm
        ("/logs/%a.out", "/logs/4294967294.out"),  # not an array job: Slurm's NO_VAL
        ("/logs/100%%.out", "/logs/100%.out"),
        ("/logs/%x-%j.out", "/logs/train-42.out"),
        ("/logs/%u/%x_%j_%N.log", "/logs/alice/train_42_gpu01.log"),
    ],
)
def test_expand_pattern_fills_each_escape(pattern, path):
    check_pattern(pattern, "stdout")
    assert expand(pattern) == path


def test_expand_pattern_fills_array_ids_when_given():
    assert expand("/logs/%A_%a.out", array_job_id=7, array_task_id=3) == "/logs/7_3.out"


def test_expand_pattern_joins_a_relative_pattern_to_the_workdir():
    assert expand("logs/%x-%j.out") == os.path.join(WORKDIR, "logs", "train-42.out")


def test_expand_pattern_keeps_an_absolute_pattern_out_of_the_workdir():
    assert expand("/scratch/%j.out") == "/scratch/42.out"


def test_expand_pattern_returns_an_absolute_normalised_path():
    path = expand("./logs/../out/%j.out")
    assert os.path.isabs(path)
    assert path == os.path.join(WORKDIR, "out", "42.out")


def test_expand_pattern_slash_in_job_name_does_not_create_directories():
    path = expand("logs/%x.out", name="exp/run1/../../etc")
    assert os.path.dirname(path) == os.path.join(WORKDIR, "logs")
    assert "/" not in os.path.basename(path)


def test_expand_pattern_double_percent_is_not_read_as_an_escape():
    # %%j is a literal %j, not the job id
    assert expand("/logs/%%j.out") == "/logs/%j.out"


@pytest.mark.parametrize("pattern", ["%j.out", "logs/%x-%j.out", "%A_%a.log", "plain.txt", "100%%", "x-%%", "%u/%N"])
def test_check_pattern_accepts_patterns_slurm_users_write(pattern):
    check_pattern(pattern, "stdout")


@pytest.mark.parametrize("pattern", ["%q.out", "logs/%Z", "%4j.out", "%-"])
def test_check_pattern_rejects_unknown_escape_naming_the_field(pattern):
    with pytest.raises(InvalidRequest) as err:
        check_pattern(pattern, "stderr")
    assert err.value.field == "stderr"
    assert str(err.value).startswith("stderr:")
    assert pattern in str(err.value)


@pytest.mark.parametrize("pattern", ["out%", "%j%", "a%%%"])
def test_check_pattern_rejects_a_lone_trailing_percent(pattern):
    with pytest.raises(InvalidRequest) as err:
        check_pattern(pattern, "stdout")
    assert err.value.field == "stdout"


def test_check_pattern_rejects_nul_byte():
    with pytest.raises(InvalidRequest) as err:
        check_pattern("out\0.txt", "stdout")
    assert err.value.field == "stdout"
