"""scontrol update, requeue and requeuehold on a real corral server, as a Slurm user runs them."""

from __future__ import annotations

import socket

from tests.helpers import wait_for


def test_scontrol_update_sets_slurms_fields_and_show_job_reads_them_back(server_factory, slurm_shell, tmp_path):
    server = server_factory()
    shell = slurm_shell(server.home)
    node = socket.gethostname().split(".")[0]
    job_id = shell("sbatch -H --parsable -t 30 --wrap true", cwd=str(tmp_path)).stdout.strip()
    out = shell(f'scontrol update JobId={job_id} Comment="new note" StartTime=2030-01-02T03:04:05 '
                f"Deadline=2030-01-09T00:00:00 ReqNodeList={node} MailUser=q@r.s MailType=BEGIN TimeMin=5 "
                f"Name=renamed Dependency=afterany:{job_id}0")
    assert out.returncode != 0 and "dependency" in out.stderr  # no job {id}0: refused, naming the field
    out = shell(f'scontrol update JobId={job_id} Comment="new note" StartTime=2030-01-02T03:04:05 '
                f"Deadline=2030-01-09T00:00:00 ReqNodeList={node} MailUser=q@r.s MailType=BEGIN TimeMin=5 "
                "Name=renamed && scontrol show job " + job_id, TZ="UTC")
    assert out.returncode == 0, out.stderr
    record = out.stdout
    assert f"JobId={job_id} JobName=renamed\n" in record
    assert "TimeLimit=00:30:00 TimeMin=00:05:00\n" in record
    assert "StartTime=2030-01-02T03:04:05 EndTime=2030-01-02T03:34:05 Deadline=2030-01-09T00:00:00\n" in record
    assert f"\n   ReqNodeList={node} ExcNodeList=(null)\n" in record
    assert "\n   Comment=new note \n" in record and "\n   MailUser=q@r.s MailType=BEGIN\n" in record
    bad = shell(f"scontrol update JobId={job_id} MailType=BOGUS")
    assert bad.returncode == 1 and "mail_type" in bad.stderr and "BOGUS" in bad.stderr


def test_scontrol_requeue_and_requeuehold_put_a_running_job_back_in_the_queue(server_factory, slurm_shell, tmp_path):
    server = server_factory()
    client = server.client()
    shell = slurm_shell(server.home)
    job_id = shell("sbatch --parsable --wrap 'sleep 60'", cwd=str(tmp_path)).stdout.strip()
    wait_for(lambda: client.get(job_id)["state"] == "RUNNING")
    out = shell(f"scontrol requeuehold {job_id}")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: client.get(job_id)["state"] == "PENDING")
    shown = shell(f"scontrol show job {job_id}").stdout
    assert "JobState=PENDING Reason=JobHeldUser " in shown and " Restarts=1 " in shown
    refused = shell(f"scontrol requeue {job_id}")  # pending: nothing to requeue, as Slurm says
    assert refused.returncode == 1 and f"Requeue job {job_id} error:" in refused.stderr
    assert shell(f"scontrol release {job_id}").returncode == 0
    wait_for(lambda: client.get(job_id)["state"] == "RUNNING")
    assert shell(f"scontrol requeue {job_id}").returncode == 0
    wait_for(lambda: client.get(job_id)["restarts"] == 2)
    shell(f"scancel {job_id}")


def _priority_shown(record: str) -> int:
    return int(record.split("\n   Priority=", 1)[1].split()[0])


def test_scontrol_show_job_gives_the_priority_that_sprio_and_corral_priority_give(server_factory, slurm_shell,
                                                                                   tmp_path):
    server = server_factory()  # 4 GPUs
    client = server.client()
    shell = slurm_shell(server.home)
    cwd = str(tmp_path)
    running = shell("sbatch --parsable -G 4 -t 10 --wrap 'sleep 300'", cwd=cwd).stdout.strip()
    wait_for(lambda: client.get(running)["state"] == "RUNNING")
    waiting = shell("sbatch --parsable -G 1 -t 10 --wrap true", cwd=cwd).stdout.strip()
    array = shell("sbatch --parsable -G 1 -t 10 --array=0-3 --wrap true", cwd=cwd).stdout.strip()
    wait_for(lambda: {int(waiting), int(array) + 1} <= {row["id"] for row in client.priorities()})

    sprio = {line.split()[0]: int(line.split()[2]) for line in shell("sprio -h").stdout.splitlines()}
    ranked = {str(row["id"]): row["priority"] for row in client.priorities()}
    assert sprio[waiting] == ranked[waiting] > 1
    assert _priority_shown(shell(f"scontrol show job {waiting}").stdout) == sprio[waiting]
    # the array's untaken tasks (its own record) wait with the priority of its first task, as Slurm's do
    first_task = str(int(array) + 1)
    assert _priority_shown(shell(f"scontrol show job {array}").stdout) == sprio[first_task]
    assert _priority_shown(shell(f"scontrol show job {array}_2").stdout) == sprio[first_task]
    # a running job keeps the priority it started with (Slurm recomputes only pending jobs'), not 1
    [started] = [e for e in client.get(running)["events"] if e["kind"] == "started"]
    assert started["priority"] > 1
    assert _priority_shown(shell(f"scontrol show job {running}").stdout) == started["priority"]
    assert client.get(running)["priority"] == started["priority"]

    server.stop()  # read back from the database by the next server: still the one it started with
    server.start()
    assert _priority_shown(shell(f"scontrol show job {running}").stdout) == started["priority"]
    shell(f"scancel {running}")
    wait_for(lambda: client.get(waiting)["state"] == "COMPLETED")
    after = _priority_shown(shell(f"scontrol show job {waiting}").stdout)
    assert sprio[waiting] <= after < sprio[waiting] + 10  # what it started with: its age grew for a few seconds
