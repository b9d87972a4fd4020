"""sacct of a job that requeues itself from its step (`scontrol requeue`), compared with what Slurm 22.05 printed
for the same script on the testbed (golden/sacct_requeued*.txt, its job 13): the newest run's record, its step
numbered from 0 again; with -D a record per run, the first REQUEUED with its batch and step CANCELLED 0:15."""

from __future__ import annotations

import getpass
import os

from tests.cli.slurm.goldens import golden

SCRIPT = """#!/bin/bash
#SBATCH --job-name=again
#SBATCH --output=again-%j.out
#SBATCH --open-mode=append
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  srun bash -c 'scontrol requeue $SLURM_JOB_ID; sleep 30'
fi
srun true
"""
SLURMS = "13"  # the testbed's job id in the captures


def _theirs(name: str, ours: str, node: str) -> list[str]:
    """A capture's lines with the testbed's job id and node as ours."""
    lines = []
    for line in golden(name).splitlines():
        if line.startswith(SLURMS) and "|" in line:
            fields = line.split("|")
            line = "|".join(ours + field[len(SLURMS):] if field == SLURMS or field.startswith(SLURMS + ".")
                            else node if field == "vm" else field for field in fields)
        elif line.startswith(SLURMS):
            line = ours + line[len(SLURMS):]
        lines.append(line)
    return lines


def _columns(lines: list[str]) -> list[list[str]]:
    """A column table's header lines as they are, its rows as their words (the job id's width differs)."""
    return [[line] if index < 2 else line.split() for index, line in enumerate(lines)]


def test_sacct_shows_a_requeued_jobs_runs_as_slurm_does(server_factory, slurm_shell, tmp_path, short_tmp,
                                                        testbed_clock):
    home = os.path.join(short_tmp, "home")
    os.makedirs(home)
    user = getpass.getuser()
    with open(os.path.join(home, "config.toml"), "w") as f:  # the testbed's partition and account
        f.write(f'[scheduler]\ndefault_partition = "debug"\n[partitions.debug]\n[accounts.{user}]\n'
                f'members = ["{user}"]\n')
    server = server_factory(gpus=0, home=home)
    shell = slurm_shell(server.home)
    (tmp_path / "again.sh").write_text(SCRIPT)
    out = shell("sbatch --parsable again.sh", cwd=str(tmp_path), USER=user)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    ended = server.client().wait(job, timeout=60)
    assert (ended["state"], ended["restarts"]) == ("COMPLETED", 1), (ended, (tmp_path / f"again-{job}.out").read_text())
    node = ended["node"]

    def sacct(options: str) -> list[str]:
        answer = shell(f"sacct -j {job} {options}")
        assert answer.returncode == 0, answer.stderr
        return answer.stdout.splitlines()

    # the newest run: what submitit reads, and sacct's default columns
    assert sacct("-o JobID,State,NodeList --parsable2") == _theirs("sacct_requeued_submitit.txt", job, node)
    assert _columns(sacct("")) == _columns(_theirs("sacct_requeued.txt", job, node))
    # every run; the first run's step was killed with its run, by its SIGTERM or the SIGKILL after
    every = sacct("-D -o JobID,State,NodeList --parsable2")
    assert every == _theirs("sacct_requeued_submitit_D.txt", job, node)
    mine, theirs = _columns(sacct("-D")), _columns(_theirs("sacct_requeued_D.txt", job, node))
    assert mine[4][-1] in ("0:15", "0:9")
    mine[4][-1] = theirs[4][-1]
    assert mine == theirs
    assert _columns(sacct("-X -D")) == _columns(_theirs("sacct_requeued_X_D.txt", job, node))
    # the times: each run's record from its start to its requeue, the next submitted as it was requeued
    fields = "JobID,JobIDRaw,JobName,State,ExitCode,Submit,Eligible,Start,End,NodeList,AllocCPUS"
    rows = [line.split("|") for line in sacct(f"-D -P -o {fields}")]
    slurm = [line.split("|") for line in _theirs("sacct_requeued_P_D.txt", job, node)]
    assert [row[:4] for row in rows] == [row[:4] for row in slurm]
    assert [row[4] for row in rows[:3] + rows[4:]] == [row[4] for row in slurm[:3] + slurm[4:]]  # (the step: above)
    header = rows[0]
    first, again = (dict(zip(header, rows[index])) for index in (1, 4))
    assert first["Submit"] <= first["Start"] <= first["End"] == again["Submit"] <= again["Start"] <= again["End"]
    assert rows[2][header.index("Start")] == first["Start"] and rows[5][header.index("Start")] == again["Start"]


def _ended_then_requeued(**changes) -> dict:
    """The testbed's job 12 (`exit 3`, requeued once it had ended, failing again) as corral's API shows it."""
    def at(clock: str) -> str:
        return f"2026-12-02T10:32:{clock}.000Z"

    job = {
        "id": 12, "ref": "12", "name": "ended.sh", "user": "root", "state": "FAILED", "exit_code": 3, "signal": None,
        "restarts": 1, "cpus": 1, "mem_mb": 1024, "nodes": 1, "node": "vm", "partition": "debug", "account": "root",
        "submit_time": at("17"), "start_time": at("31"), "end_time": at("31"), "steps": [],
        "events": [{"time": at("17"), "kind": "submitted"}, {"time": at("18"), "kind": "started", "node": "vm"},
                   {"time": at("20"), "kind": "requeued", "exit_code": 3, "state": "FAILED", "ended": at("18")},
                   {"time": at("31"), "kind": "started", "node": "vm"},
                   {"time": at("31"), "kind": "ended", "state": "FAILED"}],
    }
    job.update(changes)
    return job


def test_a_job_requeued_once_it_had_ended_keeps_that_runs_record(testbed_clock):
    from corral.cli.slurm.sacct_format import format_sacct

    text = format_sacct([_ended_then_requeued()], {}, now=1796207600, fields="JobID,State,ExitCode,Submit,Start,End",
                        parsable="", duplicates=True)
    assert text == golden("sacct_requeued_ended_P_D.txt")
    newest = format_sacct([_ended_then_requeued()], {}, now=1796207600, fields="JobID,State,Submit", parsable="")
    assert newest.splitlines()[1:] == ["12|FAILED|2026-12-02T10:32:20", "12.batch|FAILED|2026-12-02T10:32:31"]


def test_a_preempted_run_is_recorded_preempted(testbed_clock):
    # slurmctld's _job_requeue_op logs a run that a preemption requeued as JOB_PREEMPTED, any other as JOB_REQUEUE
    from corral.cli.slurm.sacct_format import format_sacct

    job = _ended_then_requeued()
    job["events"][1:3] = [{"time": "2026-12-02T10:32:18.000Z", "kind": "started", "node": "vm"},
                          {"time": "2026-12-02T10:32:19.000Z", "kind": "preempted", "by_job": "14"},
                          {"time": "2026-12-02T10:32:20.000Z", "kind": "requeued", "signal": 9}]
    text = format_sacct([job], {}, now=1796207600, fields="JobID,State,ExitCode", parsable="", duplicates=True)
    assert text.splitlines()[1:3] == ["12|PREEMPTED|0:0", "12.batch|CANCELLED|0:9"]
