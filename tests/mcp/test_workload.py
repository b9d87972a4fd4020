"""The seed's workload shape becomes the corral request each backend can run."""

from __future__ import annotations

import pytest

from corral.errors import InvalidRequest
from corral.mcp.workload import pyxis_script, workload_request

GOLDEN_PYXIS = """\
#!/bin/bash
# corral workload: runs in a container through Pyxis/enroot (the cluster needs the Pyxis plugin)
exec srun '--container-image=nvcr.io#nvidia/pytorch:24.05-py3' \
--container-mounts="${CORRAL_HOME}:${CORRAL_HOME},${PWD}:${PWD}" --container-workdir="${PWD}" \
python train.py --name 'my run; rm -rf /' '$HOME'
"""


def test_the_seed_shape_maps_onto_corral_fields():
    request = workload_request(
        backend="local", name="llm", command=["python", "train.py"], args=["--lr", "3e-4"], gpus=2,
        gpu_memory_mb=40960, env=[{"name": "EPOCHS", "value": "10"}, {"name": "SEED", "value": 7}],
        labels={"team": "ml"}, preemptible=True, max_runtime_s=3600)
    assert request == {
        "name": "llm", "command": ["python", "train.py", "--lr", "3e-4"], "gpus": 2, "gpu_mem_mb": 40960,
        "env": {"EPOCHS": "10", "SEED": "7"}, "labels": {"team": "ml"}, "preemptible": True, "time_limit_s": 3600,
    }
    assert workload_request(backend="local", command=["true"], env={"A": 1.5})["env"] == {"A": "1.5"}


def test_on_the_local_backend_an_image_is_the_jobs_image_field_and_the_command_its_own():
    request = workload_request(backend="local", command=["python", "train.py"], args=["--lr", "3e-4"],
                               image="nvcr.io#nvidia/pytorch:24.05-py3", gpus=1)
    assert request == {"command": ["python", "train.py", "--lr", "3e-4"], "image": "nvcr.io#nvidia/pytorch:24.05-py3",
                       "gpus": 1}
    # an archive's relative path goes as written: the server resolves it against the job's working directory
    assert workload_request(backend="local", command=["true"], image="img/app.sif")["image"] == "img/app.sif"
    with pytest.raises(InvalidRequest) as bad:
        workload_request(backend="local", command=["true"], image="two words")
    assert bad.value.field == "image"


def test_on_slurm_an_image_runs_through_pyxis_with_every_argument_quoted():
    request = workload_request(backend="slurm", command=["python", "train.py"], args=["--name", "my run; rm -rf /", "$HOME"],
                               image="nvcr.io#nvidia/pytorch:24.05-py3", gpus=1)
    assert "command" not in request and request["name"] == "python" and request["gpus"] == 1
    assert request["script"] == GOLDEN_PYXIS


def test_bad_workload_input_names_the_field():
    with pytest.raises(InvalidRequest) as empty:
        workload_request(backend="local", command=[])
    assert empty.value.field == "command"
    with pytest.raises(InvalidRequest) as nameless:
        workload_request(backend="local", command=["true"], env=[{"value": "x"}])
    assert nameless.value.field == "env"
    for image in ("", "two words", "line\nbreak", "--privileged"):
        with pytest.raises(InvalidRequest) as bad:
            pyxis_script(image, ["true"])
        assert bad.value.field == "image"


def test_the_job_and_workload_views_show_the_image():
    from corral.core.jobspec.job import Job
    from corral.core.jobspec.job_fields import job_fields
    from corral.core.jobspec.states import JobState
    from corral.mcp.views import job_view, workload_view
    from tests.helpers import make_spec

    spec = make_spec(command=["python", "train.py"], image="nvcr.io#nvidia/pytorch:24.05-py3")
    answer = dict(job_fields(Job(id=4, spec=spec, state=JobState.PENDING, submit_time=1.0)))
    assert job_view(answer, home="/h")["image"] == "nvcr.io#nvidia/pytorch:24.05-py3"
    assert workload_view(answer, home="/h")["image"] == "nvcr.io#nvidia/pytorch:24.05-py3"
    on_host = dict(job_fields(Job(id=5, spec=make_spec(), state=JobState.PENDING, submit_time=1.0)))
    assert job_view(on_host, home="/h")["image"] is None and workload_view(on_host, home="/h")["image"] is None
