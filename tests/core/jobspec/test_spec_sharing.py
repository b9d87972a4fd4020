"""A job's GPU share in its spec: `--gres=shard:N` (request, sbatch options, #SBATCH line) and
`--gpu-mem SIZE --gpu-share`; `--gpu-mem` alone keeps its meaning; what makes no sense is refused by field."""

from __future__ import annotations

import pytest

from corral.core.jobspec.spec import update_spec
from corral.errors import InvalidRequest
from tests.core.jobspec.test_spec import build, invalid, workdir  # noqa: F401 - fixtures


def test_shards_from_the_request_the_sbatch_options_or_a_script_make_a_one_gpu_sharing_job(build):
    for request in ({"command": ["true"], "gres": "shard:2"},
                    {"command": ["true"], "options": ["--gres=shard:2"]},
                    {"script": "#!/bin/sh\n#SBATCH --gres=shard:2\ntrue\n"}):
        spec = build(request)
        assert (spec.gpus, spec.gpu_shards, spec.gpu_share_mb, spec.gpu_mem_mb) == (1, 2, 0, None)  # sized by the server
    assert build({"command": ["true"], "gres": "shard"}).gpu_shards == 1


def test_a_memory_budget_with_gpu_share_and_gpu_mem_alone_still_a_minimum_of_whole_gpus(build):
    shared = build({"command": ["true"], "gpu_mem": "20G", "gpu_share": True})
    assert (shared.gpus, shared.gpu_share_mb, shared.gpu_mem_mb, shared.request.gpu_share_mb) == (1, 20480, 20480, 20480)
    whole = build({"command": ["true"], "gpus": 2, "gpu_mem": "20G"})
    assert (whole.gpus, whole.gpu_share_mb, whole.request.gpu_share_mb) == (2, 0, 0)


@pytest.mark.parametrize(("request_", "field", "words"), [
    ({"gpu_share": True}, "gpu_share", "add --gpu-mem SIZE"),
    ({"gpu_share": True, "gpu_mem": "10G", "gpus": 2}, "gpu_share", "part of one GPU"),
    ({"gres": "shard:2", "gpus": 1}, "gres", "part of one GPU"),
    ({"gres": "shard:two"}, "gres", "write shard:N"),
    ({"gres": "shard:2", "exclusive": True}, "gres", "--exclusive"),
    ({"gres": "shard:2", "gpu_share": True}, "gpu_share", "give one"),
    ({"gpu_share": "maybe", "gpu_mem": "1G"}, "gpu_share", "yes or no"),
])
def test_share_requests_that_make_no_sense_are_refused_naming_the_field(build, request_, field, words):
    assert words in str(invalid(build, {"command": ["true"], **request_}, field))


def test_a_pending_sharing_jobs_share_cannot_be_changed(build):
    spec = build({"command": ["true"], "gpu_mem": "20G", "gpu_share": True})
    with pytest.raises(InvalidRequest) as err:
        update_spec(spec, {"gpus": 2}, 0.0)
    assert err.value.field == "gpus" and "a sharing job's GPU share cannot be changed" in str(err.value)
    assert update_spec(spec, {"time": "1h"}, 0.0).gpu_share_mb == 20480
