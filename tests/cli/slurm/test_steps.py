"""Job steps: `srun` inside a corral job runs the job's tasks on its allocation (its GPUs shared out per
task), finds corral's srun first on the job's PATH, and sacct shows each step after the job's batch step."""

from __future__ import annotations

import getpass
import os

import pytest

TWO_TASKS = """#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
echo "batch: $SLURM_NTASKS $SLURM_TASKS_PER_NODE $SLURM_CPUS_PER_TASK $(command -v srun)"
srun -l bash -c 'echo $SLURM_PROCID $SLURM_LOCALID $CUDA_VISIBLE_DEVICES $SLURM_STEP_ID $SLURM_NTASKS $SLURM_NODEID'
srun -n 1 bash -c 'exit 3'
echo "rc=$?"
srun -n 3 true || echo "refused=$?"
srun --gpus-per-task=2 true || echo "too many gpus=$?"
"""


def _sacct(shell, job: str, *options: str) -> list[list[str]]:
    out = shell(f"sacct -j {job} -P -o JobID,JobName,State,ExitCode,NTasks {' '.join(options)}")
    assert out.returncode == 0, out.stderr
    return [line.split("|") for line in out.stdout.splitlines()]


def test_two_tasks_get_a_gpu_each_and_sacct_shows_the_batch_step_and_each_srun_step(server_factory, slurm_shell,
                                                                                       tmp_path):
    server = server_factory(gpus=4)
    client = server.client()
    # submitted with a PATH that has no srun at all: the job's PATH has corral's first
    job = client.submit(script=TWO_TASKS, env={"PATH": "/usr/bin:/bin"}, export="NONE", workdir=str(tmp_path),
                        stdout="out.txt", stderr="err.txt")
    ended = client.wait(job["id"], timeout=60)
    assert ended["state"] == "COMPLETED", ended
    assert ended["ntasks"] == 2 and ended["gpus"] == 2 and ended["cpus"] == 2
    text = (tmp_path / "out.txt").read_text()
    lines = text.splitlines()
    batch = lines[0].split()
    assert batch[:4] == ["batch:", "2", "2", "1"] and batch[4].endswith("/srun") and "corral" in batch[4], text
    labelled = sorted(line for line in lines if line[:3] in ("0: ", "1: "))
    assert len(labelled) == 2, text
    zero, one = (line.split() for line in labelled)
    assert zero[:3] == ["0:", "0", "0"] and one[:3] == ["1:", "1", "1"]
    gpus = {zero[3], one[3]}
    assert len(gpus) == 2 and gpus <= {str(g) for g in ended["gpu_ids"]}  # one each, both the job's own
    assert zero[4:] == ["0", "2", "0"] and one[4:] == ["0", "2", "0"]  # step 0, 2 tasks, node 0
    assert "rc=3" in lines
    assert "refused=1" in lines and "too many gpus=1" in lines
    errors = (tmp_path / "err.txt").read_text()
    assert "task 0: Exited with exit code 3" in errors
    assert "More processors requested than permitted" in errors
    assert "--gpus-per-task=2 with 2 tasks asks for 4 GPUs; job" in errors
    shell = slurm_shell(server.home)
    ref = str(job["id"])
    rows = _sacct(shell, ref)
    assert rows == [
        ["JobID", "JobName", "State", "ExitCode", "NTasks"],
        [ref, ended["name"], "COMPLETED", "0:0", ""],
        [f"{ref}.batch", "batch", "COMPLETED", "0:0", "1"],
        [f"{ref}.0", "bash", "COMPLETED", "0:0", "2"],
        [f"{ref}.1", "bash", "FAILED", "3:0", "1"],
    ]  # as Slurm 22.05 lists them; the refused sruns made no step
    assert _sacct(shell, ref, "-X") == rows[:2]


def test_a_task_that_fails_stops_the_others_with_kill_on_bad_exit(server_factory, slurm_shell, tmp_path):
    server = server_factory(gpus=0)
    script = ("#!/bin/bash\n#SBATCH -n 2\n#SBATCH -e err.txt\n#SBATCH -o out.txt\n"
              "srun -K bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 4; fi; sleep 300'\necho rc=$?\n")
    (tmp_path / "job.sh").write_text(script)
    out = slurm_shell(server.home)("sbatch --parsable --wait job.sh", cwd=str(tmp_path), USER=getpass.getuser())
    assert out.returncode == 0, out.stderr
    job = out.stdout.split()[-1]
    assert (tmp_path / "out.txt").read_text().strip() == "rc=143"  # as Slurm's srun: the signal that ended task 0
    errors = (tmp_path / "err.txt").read_text().splitlines()
    assert errors == [f"srun: error: {errors[0].split()[2]} task 1: Exited with exit code 4",
                      f"srun: launch/slurm: _step_signal: Terminating StepId={job}.0",
                      f"srun: error: {errors[0].split()[2]} task 0: Terminated",
                      f"srun: Force Terminated StepId={job}.0"]
    rows = _sacct(slurm_shell(server.home), job)
    assert rows[3] == [f"{job}.0", "bash", "CANCELLED", "0:15", "2"]  # Slurm 22.05's row for the same script


def test_cancelling_the_job_cancels_its_running_step(server_factory, slurm_shell):
    server = server_factory(gpus=0)
    client = server.client()
    job = client.submit(script="#!/bin/bash\nsrun sleep 300\n")
    shell = slurm_shell(server.home)
    for _ in range(600):  # the step is opened before its task starts
        rows = _sacct(shell, str(job["id"]))
        if len(rows) > 3:
            break
    assert rows[3][:3] == [f"{job['id']}.0", "sleep", "RUNNING"]
    client.cancel(job["id"])
    assert client.wait(job["id"], timeout=60)["state"] == "CANCELLED"
    for _ in range(200):
        rows = _sacct(shell, str(job["id"]))
        if rows[3][2] != "RUNNING":
            break
    assert rows[3][2] == "CANCELLED"


@pytest.mark.parametrize("bind", ["none", "map_gpu:1,0"])
def test_gpu_bind_shares_or_maps_the_steps_gpus(server_factory, tmp_path, bind):
    server = server_factory(gpus=2)
    client = server.client()
    job = client.submit(script=f"#!/bin/bash\n#SBATCH -n 2 --gpus=2\nsrun -l --gpu-bind={bind} -G 2 "
                               "bash -c 'echo $CUDA_VISIBLE_DEVICES'\n", workdir=str(tmp_path), stdout="out.txt")
    ended = client.wait(job["id"], timeout=60)
    assert ended["state"] == "COMPLETED"
    gpus = [str(g) for g in ended["gpu_ids"]]
    seen = {line.replace(" ", "") for line in (tmp_path / "out.txt").read_text().split("\n") if line}
    if bind == "none":
        assert seen == {f"0:{','.join(gpus)}", f"1:{','.join(gpus)}"}
    else:
        assert seen == {f"0:{gpus[1]}", f"1:{gpus[0]}"}


def test_scontrol_shows_the_running_steps_as_slurm_does(server_factory, slurm_shell, testbed_clock):
    server = server_factory(gpus=0)
    client = server.client()
    shell = slurm_shell(server.home)
    assert shell("scontrol show step").stdout == "No job steps in the system\n"
    job = client.submit(script="#!/bin/bash\n#SBATCH -n 2\nsrun -n 2 sleep 300\n")
    ref = str(job["id"])
    for _ in range(600):
        if len(_sacct(shell, ref)) > 3:
            break
    out = shell(f"scontrol show step; scontrol -o show step {ref}.0; scontrol show step {ref}.7")
    client.cancel(job["id"])
    running = client.get(job["id"])
    start = running["start_time"]
    records = out.stdout.split("\n\n")
    node = running["node"]
    assert records[0].splitlines()[1:] == [
        f"   State=RUNNING Partition={running['partition']} NodeList={node}",
        "   Nodes=1 CPUs=0 Tasks=1 Name=batch Network=(null)", "   TRES=(null)", "   ResvPorts=(null)",
        "   CPUFreqReq=Default", "   SrunHost:Pid=(null):0"]
    assert records[0].startswith(f"StepId={ref}.batch UserId={os.getuid()} StartTime=")
    assert records[1].splitlines()[2:] == [
        "   Nodes=1 CPUs=2 Tasks=2 Name=sleep Network=(null)", "   TRES=cpu=2,mem=0,node=1", "   ResvPorts=(null)",
        "   CPUFreqReq=Default Dist=Block", f"   SrunHost:Pid={node}:0"]
    assert records[2].startswith(f"StepId={ref}.0 UserId={os.getuid()} StartTime=") and "Name=sleep" in records[2]
    assert "\n" not in records[2].strip() and start
    assert out.stderr == f"Job step {ref}.7 not found\n"


def test_a_step_waits_while_the_jobs_other_steps_hold_its_gpu_and_parallel_steps_get_their_own(server_factory,
                                                                                               tmp_path):
    server = server_factory(gpus=2)
    client = server.client()
    script = """#!/bin/bash
#SBATCH -n 2 --gpus=2
srun -n 1 --gpus=1 bash -c 'touch a.up; while [ ! -e b.up ]; do sleep 0.05; done; echo a $CUDA_VISIBLE_DEVICES' &
srun -n 1 --gpus=1 bash -c 'touch b.up; while [ ! -e a.up ]; do sleep 0.05; done; echo b $CUDA_VISIBLE_DEVICES' &
wait
srun -n 1 --gpus=2 bash -c 'touch holding; while [ ! -e release ]; do sleep 0.05; done; echo c $CUDA_VISIBLE_DEVICES' &
while [ ! -e holding ]; do sleep 0.05; done
srun -n 1 --gpus=2 --overlap true
srun -n 1 --gpus=1 bash -c 'echo d $CUDA_VISIBLE_DEVICES' 2> d.err &
while ! grep -q "temporarily disabled" d.err 2>/dev/null; do sleep 0.05; done
touch release
wait
cat d.err >&2
"""
    job = client.submit(script=script, workdir=str(tmp_path), stdout="out.txt", stderr="err.txt")
    ended = client.wait(job["id"], timeout=60)
    assert ended["state"] == "COMPLETED", (tmp_path / "err.txt").read_text()
    seen = dict(line.split() for line in (tmp_path / "out.txt").read_text().splitlines())
    gpus = {str(g) for g in ended["gpu_ids"]}
    assert {seen["a"], seen["b"]} == gpus  # two steps running at once: a GPU each, never the same one
    assert seen["c"] == ",".join(str(g) for g in ended["gpu_ids"]) and seen["d"] in gpus
    errors = (tmp_path / "err.txt").read_text().splitlines()
    ref = job["id"]
    assert errors == [f"srun: Job {ref} step creation temporarily disabled, retrying (Requested nodes are busy)",
                      f"srun: Step created for StepId={ref}.4"]  # d waited for c; the --overlap step did not
    steps = client.steps(ref)
    assert [(s["step_id"], s["state"], len(s["gpu_ids"])) for s in steps] == [
        (0, "COMPLETED", 1), (1, "COMPLETED", 1), (2, "COMPLETED", 2), (3, "COMPLETED", 2), (4, "COMPLETED", 1)]
    assert steps[3]["overlap"] and not steps[4]["overlap"]


def test_srun_steps_in_a_salloc_allocation_are_shown_by_sacct(server_factory, slurm_shell):
    server = server_factory(gpus=2)
    shell = slurm_shell(server.home)
    out = shell("salloc -G 2 -n 2 bash -c 'srun -n 1 --gpus=1 bash -c \"echo one \\$CUDA_VISIBLE_DEVICES\"; "
                "srun -l bash -c \"echo two \\$SLURM_PROCID\"; echo id=$SLURM_JOB_ID' < /dev/null")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    job = lines[-1].removeprefix("id=")
    assert lines[0] == "one 0" and sorted(lines[1:3]) == ["0: two 0", "1: two 1"]
    rows = _sacct(shell, job)[1:]  # below the header
    assert [row[0] for row in rows] == [job, f"{job}.0", f"{job}.1"]  # no .batch: salloc's job runs no script
    assert rows[1:] == [[f"{job}.0", "bash", "COMPLETED", "0:0", "1"], [f"{job}.1", "bash", "COMPLETED", "0:0", "2"]]
