"""Pyxis's options on sbatch, srun and salloc: what reaches the server, and what a step inside a job may ask."""

from __future__ import annotations

import pytest

from corral.cli.slurm import interactive, sbatch, step
from corral.cli.slurm.argv import parse
from corral.cli.slurm.command import Refused
from corral.errors import CorralError

JOB_CONTAINER = {"image": "nvcr.io#nvidia/pytorch:24.01-py3", "mounts": ["/data:/data:ro"], "workdir": None,
                 "env": [], "mount_home": True, "remap_root": False}


class FakeServer:
    def __init__(self, answer: dict | None = None, refuse: bool = False) -> None:
        self.asked: list[tuple[str, str, object]] = []
        self.answer = answer or {"id": 5}
        self.refuse = refuse

    def ask(self, method: str, path: str, body: object = None) -> dict:
        self.asked.append((method, path, body))
        if self.refuse:
            raise CorralError("stop here")
        return self.answer


def test_sbatchs_pyxis_flags_take_no_value_so_the_script_after_them_stays_the_script(tmp_path, monkeypatch):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    fake = FakeServer()
    monkeypatch.setattr(sbatch, "server", lambda: fake)
    monkeypatch.delenv("SBATCH_JOB_NAME", raising=False)
    assert sbatch.main(["--container-image=ubuntu:22.04", "--no-container-mount-home", "--container-remap-root",
                        "--container-mounts", "/data:/data:ro", str(script)]) == 0
    (_, _, body), = fake.asked
    assert body["script_name"] == "job.sh"
    assert body["options"] == ["--container-image=ubuntu:22.04", "--no-container-mount-home",
                               "--container-remap-root", "--container-mounts=/data:/data:ro"]


@pytest.mark.parametrize("program", ["srun", "salloc"])
def test_srun_and_salloc_from_a_login_shell_send_the_container_options_as_sbatch_does(program, monkeypatch):
    fake = FakeServer(refuse=True)
    monkeypatch.setattr(interactive, "server", lambda: fake)
    with pytest.raises(Refused):
        interactive.main(["--container-image=ubuntu:22.04", "--no-container-mount-home", "--container-env=HF_HOME",
                          "nvidia-smi"], program=program)
    (_, _, body), = fake.asked
    assert body["command"] == ["nvidia-smi"]
    assert body["options"] == ["--container-image=ubuntu:22.04", "--no-container-mount-home",
                               "--container-env=HF_HOME"]


def _given(argv: list[str]) -> dict[str, object]:
    given, command = parse(argv + ["python", "x.py"], step.OPTIONS, stop_at_first_operand=True)
    assert command == ["python", "x.py"]
    return given


def test_a_step_that_repeats_its_jobs_image_and_mounts_runs(monkeypatch):
    fake = FakeServer({"id": 3, "container": JOB_CONTAINER})
    monkeypatch.setattr(step, "server", lambda: fake)
    step._check_container(_given(["--container-image", JOB_CONTAINER["image"], "--container-mounts=/data:/data:ro"]),
                          "3")
    step._check_container(_given([f"--container-image={JOB_CONTAINER['image']}"]), "3")
    assert fake.asked[0][:2] == ("GET", "/api/v1/jobs/3")


@pytest.mark.parametrize("argv, job_container, said", [
    (["--container-image=ubuntu:22.04"], None, "job 3 runs on the host"),
    (["--container-image=ubuntu:22.04"], JOB_CONTAINER,
     "--container-image: this step asks for 'ubuntu:22.04', job 3's container has 'nvcr.io#"),
    ([f"--container-image={JOB_CONTAINER['image']}", "--container-mounts=/scratch:/scratch"], JOB_CONTAINER,
     "--container-mounts: this step asks for ['/scratch:/scratch']"),
    ([f"--container-image={JOB_CONTAINER['image']}", "--container-remap-root"], JOB_CONTAINER,
     "--container-remap-root: this step asks for True"),
    (["--container-mounts=/data:/data"], JOB_CONTAINER, "--container-image: job 3 runs in"),
])
def test_a_step_in_an_image_of_its_own_is_refused_by_name(argv, job_container, said, monkeypatch):
    monkeypatch.setattr(step, "server", lambda: FakeServer({"id": 3, "container": job_container}))
    with pytest.raises(Refused) as err:
        step._check_container(_given(argv), "3")
    assert said in str(err.value) and "steps in their own images are not supported" in str(err.value)


def test_a_steps_named_container_is_refused():
    with pytest.raises(Refused, match="--container-name=dev: named containers are not supported"):
        step._check_container(_given(["--container-name=dev"]), "3")


def test_sbatch_and_srun_run_in_their_image_on_a_live_server(server_factory, slurm_shell, tmp_path, podman,
                                                            busybox_image):
    server = server_factory(gpus=2)
    (tmp_path / "boxed.sh").write_text(f"#!/bin/sh\n#SBATCH --container-image={busybox_image}\n#SBATCH -G 1\n"
                                       'echo "batch $IMAGE_OWN gpu=$CUDA_VISIBLE_DEVICES"\n')
    out = slurm_shell(server.home)(
        f"sbatch --wait -o boxed.out boxed.sh && cat boxed.out && "
        f"echo typed | srun --container-image={busybox_image} sh -c 'read line; echo \"srun $IMAGE_OWN $line\"'",
        cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-2:] == ["batch from-the-image gpu=0", "srun from-the-image typed"]


def test_srun_pty_gives_a_terminal_inside_the_image_and_its_exit_code(server_factory, slurm_path, tmp_path, podman,
                                                                      busybox_image):
    import os

    import pexpect

    server = server_factory(gpus=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(PATH=f"{slurm_path}:{os.environ['PATH']}", CORRAL_HOME=server.home)
    child = pexpect.spawn("srun", [f"--container-image={busybox_image}", "--pty", "sh"], env=env, cwd=str(tmp_path),
                          timeout=60)
    child.sendline('tty; echo "in-$IMAGE_OWN"; exit 3')
    child.expect(pexpect.EOF)
    child.close()
    shown = child.before.decode()
    assert "/dev/pts/" in shown and "in-from-the-image" in shown
    assert child.exitstatus == 3
