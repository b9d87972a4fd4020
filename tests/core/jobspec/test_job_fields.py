"""The job's outward fields: what the API, `corral show --json` and the MCP views are built from."""

from __future__ import annotations

from corral.core.jobspec.job import Job
from corral.core.jobspec.job_fields import job_fields
from corral.core.jobspec.states import JobState
from tests.helpers import make_spec


def test_a_container_jobs_fields_name_its_image_and_settings():
    spec = make_spec(image="nvcr.io#nvidia/pytorch:24.01-py3", container_mounts="/data:/data:ro",
                     container_workdir="/workspace", container_env="NCCL_DEBUG", container_remap_root="yes")
    fields = job_fields(Job(id=7, spec=spec, state=JobState.PENDING, submit_time=1.0))
    assert fields["image"] == "nvcr.io#nvidia/pytorch:24.01-py3"
    assert fields["container"] == {"image": "nvcr.io#nvidia/pytorch:24.01-py3", "mounts": ["/data:/data:ro"],
                                   "workdir": "/workspace", "env": ["NCCL_DEBUG"], "mount_home": True,
                                   "remap_root": True}


def test_a_host_jobs_fields_have_no_image():
    fields = job_fields(Job(id=8, spec=make_spec(), state=JobState.PENDING, submit_time=1.0), detail=False)
    assert fields["image"] is None and fields["container"] is None


def test_the_rest_request_takes_the_container_fields():
    from corral.api.schemas import JobRequest
    from corral.core.jobspec.job_spec import CONTAINER_FIELDS

    request = JobRequest(command=["nvidia-smi"], image="ubuntu:22.04", container_mounts=["/data:/data:ro"],
                         container_mount_home="no", container_remap_root=True)
    assert CONTAINER_FIELDS <= set(JobRequest.model_fields)
    assert request.model_dump(exclude_none=True)["image"] == "ubuntu:22.04"
