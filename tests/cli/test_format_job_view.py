"""`corral show`: one job's lines."""

from __future__ import annotations

from corral.cli.format import job_view
from tests.cli.test_terminal import JOB


def test_show_names_a_container_jobs_image_mounts_and_workdir_after_its_workdir():
    job = dict(JOB, name="train", reason=None, command=["python", "train.py"], labels={},
               container={"image": "nvcr.io#nvidia/pytorch:24.01-py3", "mounts": ["/data:/data:ro"],
                          "workdir": "/workspace", "env": [], "mount_home": True, "remap_root": False})
    keys = [line.split(":")[0].strip() for line in job_view(job).splitlines()]
    assert keys[keys.index("WorkDir") + 1:keys.index("WorkDir") + 4] == ["Image", "ContainerMounts", "ContainerWorkDir"]
    assert "Image: nvcr.io#nvidia/pytorch:24.01-py3" in job_view(job)


def test_show_has_no_image_line_for_a_job_on_the_host():
    job = dict(JOB, name="train", reason=None, labels={}, container=None)
    assert "Image" not in job_view(job)
    only_image = dict(job, container={"image": "ubuntu:22.04", "mounts": [], "workdir": None, "env": [],
                                      "mount_home": True, "remap_root": False})
    assert "Image: ubuntu:22.04" in job_view(only_image) and "ContainerMounts" not in job_view(only_image)
