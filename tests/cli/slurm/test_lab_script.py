"""A lab script written for Slurm runs unchanged with `corral slurm-path` on PATH: sbatch with a
dependency, squeue, sacct with a format, seff, scontrol, sinfo, sprio, srun inside a job."""

from __future__ import annotations

import getpass
import os

LAB = """set -e
job=$(sbatch --parsable prep.sh)
sbatch --dependency=afterok:$job train.sh
squeue -u $USER
while squeue -h -j $job -t PD,R,CG -o %T | grep -q .; do sleep 0.2; done
sacct -j $job --format=JobID,State,ExitCode,MaxRSS
"""


def test_a_slurm_lab_script_runs_unchanged(server_factory, slurm_shell, tmp_path):
    server = server_factory(gpus=2)
    (tmp_path / "prep.sh").write_text("#!/bin/bash\n#SBATCH -J prep\n#SBATCH --mem=1G\n"
                                      "python3 -c 'x = bytearray(60_000_000); import time; time.sleep(1)'\necho prepared\n")
    (tmp_path / "train.sh").write_text("#!/bin/bash\n#SBATCH -J train\n#SBATCH --gres=gpu:1\n#SBATCH -t 10\n"
                                       "srun --output=train-%j-%t.out bash -c 'echo step on $CUDA_VISIBLE_DEVICES'\n")
    out = slurm_shell(server.home)(LAB, cwd=str(tmp_path), USER=getpass.getuser())
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Submitted batch job ")
    train = lines[0].split()[-1]
    prep = str(int(train) - 1)
    header = lines[1].split()
    assert header == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    queued = {line.split()[0]: line.split() for line in lines[2:4]}
    assert queued[train][4] == "PD" and queued[train][-1] == "(Dependency)"
    assert queued[prep][2] == "prep" and queued[prep][4] in ("R", "PD")
    sacct = lines[-4:]
    assert sacct[0].split() == ["JobID", "State", "ExitCode", "MaxRSS"]
    assert set(sacct[1]) <= {"-", " "}
    assert sacct[2].split() == [prep, "COMPLETED", "0:0"]  # MaxRSS is on the step line, as in Slurm
    step = sacct[3].split()
    assert step[:3] == [f"{prep}.batch", "COMPLETED", "0:0"]
    assert _kilobytes(step[3]) > 50_000  # the 60 MB it held: 61440K, or 60M where it is a whole number of them
    client = server.client()
    assert client.wait(train, timeout=60)["state"] == "COMPLETED"
    assert (tmp_path / f"train-{train}-0.out").read_text().startswith("step on ")


def test_scontrol_sinfo_seff_and_sprio_answer_in_slurms_layouts(server_factory, slurm_shell, tmp_path):
    server = server_factory(gpus=1)
    client = server.client()
    shell = slurm_shell(server.home)
    done = client.submit(["python3", "-c", "x = bytearray(30_000_000)"], name="done", mem="512M")
    client.wait(done["id"], timeout=60)
    running = client.submit(["sleep", "300"], gpus=1, name="hold-gpu")
    waiting = client.submit(["true"], gpus=1, name="waiter", time="30")
    out = shell(f"scontrol show job {waiting['id']}; scontrol -o show job {running['id']}; sinfo; "
                f"seff {done['id']}; sprio -h -o '%i %u'; scontrol hold {waiting['id']}; "
                f"squeue -h -j {waiting['id']} -o '%T %r'; scontrol release {waiting['id']}; "
                f"scontrol update JobId={waiting['id']} TimeLimit=45 Nice=5; scontrol show hostnames vm[1-3]")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"JobId={waiting['id']} JobName=waiter\n" in text
    assert "   JobState=PENDING Reason=Resources Dependency=(null)\n" in text
    assert f"JobId={running['id']} JobName=hold-gpu UserId=" in text and "JobState=RUNNING" in text
    assert "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n" in text and "default*" in text
    assert f"Job ID: {done['id']}\n" in text and "State: COMPLETED (exit code 0)\n" in text
    assert "Memory Efficiency:" in text and "of 512.00 MB" in text
    assert f"{waiting['id']} {client.whoami()['user']}\n" in text
    assert "PENDING JobHeldUser\n" in text
    assert text.endswith("vm1\nvm2\nvm3\n")
    job = client.get(waiting["id"])
    assert (job["held"], job["time_limit_s"], job["nice"]) == (False, 45 * 60, 5)


def test_squeue_and_sacct_select_as_slurm_does(server_factory, slurm_shell):
    server = server_factory(gpus=1)
    client = server.client()
    shell = slurm_shell(server.home)
    failed = client.submit(["false"], name="failing")
    assert client.wait(failed["id"], timeout=60)["state"] == "FAILED"
    runner = client.submit(["sleep", "300"], gpus=1, name="runner")
    pending = client.submit(["true"], gpus=1, name="pending")
    out = shell("squeue -h -o '%i %t %j'; echo --; squeue -h -t PD -o %i; echo --; squeue -h -t all -o '%i %T'; "
                f"echo --; squeue -h -j {failed['id']} -o '%i %T %r'; echo --; sacct -X -n -P -o JobID,JobName,State; "
                f"echo --; sacct -X -n -P -s F -S midnight -E now -o JobID,ExitCode")
    assert out.returncode == 0, out.stderr
    active, pending_only, everything, by_id, history, failures = out.stdout.split("--\n")
    # Slurm's default order (P,t,-p): by partition, then state, pending before running
    assert active.splitlines() == [f"{pending['id']} PD pending", f"{runner['id']} R runner"]
    assert pending_only.split() == [str(pending["id"])]
    assert f"{failed['id']} FAILED" in everything and f"{runner['id']} RUNNING" in everything
    assert by_id.split() == [str(failed["id"]), "FAILED", "NonZeroExitCode"]
    assert history.splitlines() == [f"{failed['id']}|failing|FAILED", f"{runner['id']}|runner|RUNNING",
                                    f"{pending['id']}|pending|PENDING"]  # by submit time, as sacct orders
    assert failures.split() == [f"{failed['id']}|1:0"]
    from corral.cli.wire import Server

    listing = Server(None, server.home).ask("GET", "/api/v1/jobs?scope=finished&events=false")["jobs"]
    assert [job["id"] for job in listing] == [failed["id"]] and "events" not in listing[0]  # what sacct reads
    assert "events" in client.history()[0]
    missing = shell("squeue -j 99999")
    assert (missing.returncode, missing.stderr) == (1, "slurm_load_jobs error: Invalid job id specified\n")


def _kilobytes(size: str) -> float:
    """sacct's MaxRSS (`61440K`, `60M`, `1.5G`) in kilobytes."""
    return float(size[:-1]) * {"K": 1, "M": 1024, "G": 1024 ** 2}[size[-1]]
