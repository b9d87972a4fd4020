"""Reservations through Slurm's commands: `scontrol create|show|delete reservation` and `sinfo -T` in Slurm's formats
(pinned as slurm_sprint_reservation_info and print_sinfo_reservation print them), `sbatch --reservation`,
`squeue -o %v` and `--start`, `scontrol show job`'s Reservation= line, on a live server."""

from __future__ import annotations

import os

import pytest

from corral.cli.slurm.reservation_format import show_reservation, sinfo_reservations
from tests.cli.test_drain_cli import ROOMY, corral, running, waiting

DEMO = {"name": "demo", "node": "gpu01", "gpus": [0, 1], "cpus": 16, "mem_mb": 131072, "users": ["ada"],
        "accounts": ["vision"], "start": "2026-11-25T10:00:00Z", "end": "2026-11-25T14:00:00Z", "state": "ACTIVE"}


def test_show_reservation_is_slurms_record(testbed_clock):
    assert show_reservation(DEMO) == (
        "ReservationName=demo StartTime=2026-11-25T10:00:00 EndTime=2026-11-25T14:00:00 Duration=04:00:00\n"
        "   Nodes=gpu01 NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) Flags=SPEC_NODES\n"
        "   TRES=cpu=16,gres/gpu=2\n"
        "   AllowedPartitions=(null) QOS=(null)\n"
        "   Users=ada Groups=(null) Accounts=vision Licenses=(null) State=ACTIVE BurstBuffer=(null)\n"
        "   MaxStartDelay=(null)\n\n")
    later = {**DEMO, "users": [], "end": "2026-11-27T11:30:00Z", "state": "INACTIVE"}
    one = show_reservation(later, one_liner=True)
    assert one.endswith("Users=(null) Groups=(null) Accounts=vision Licenses=(null) State=INACTIVE "
                        "BurstBuffer=(null) MaxStartDelay=(null)\n")
    assert " Duration=2-01:30:00 " in one


def test_sinfo_t_is_slurms_table(testbed_clock):
    assert sinfo_reservations([DEMO, {**DEMO, "name": "a-long-reservation-name"}]) == (
        "RESV_NAME                   STATE           START_TIME             END_TIME     DURATION  NODELIST\n"
        "demo                       ACTIVE  2026-11-25T10:00:00  2026-11-25T14:00:00     04:00:00  gpu01\n"
        "a-long-reservation-name    ACTIVE  2026-11-25T10:00:00  2026-11-25T14:00:00     04:00:00  gpu01\n")
    assert sinfo_reservations([]) == "No reservations in the system\n"


def test_scontrol_makes_a_reservation_sbatch_runs_in_it_and_squeue_shows_it(server_factory, slurm_shell):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    shell = slurm_shell(server.home)
    assert shell("scontrol show reservation").stdout == "No reservations in the system\n"
    made = shell(f"scontrol create reservation ReservationName=demo StartTime=now Duration=1:00:00 Users=root "
                 f"TRES=gres/gpu=2 Nodes={node}")
    assert made.returncode == 0 and made.stdout == "Reservation created: demo\n", made.stderr
    later = shell("scontrol create res ReservationName=later StartTime=now+2hours Duration=60 Users=root "
                  "TRES=gres/gpu=2")
    assert later.stdout == "Reservation created: later\n", later.stderr
    show = shell("scontrol show res demo").stdout
    assert show.startswith("ReservationName=demo StartTime=") and " Duration=01:00:00\n" in show
    assert "   TRES=cpu=8,gres/gpu=2\n" in show and " State=ACTIVE " in show
    assert "State=INACTIVE" in shell("scontrol -o show reservation later").stdout
    rows = shell("sinfo -T").stdout.splitlines()
    assert rows[0].split() == ["RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST"]
    assert [r.split()[:2] for r in rows[1:]] == [["demo", "ACTIVE"], ["later", "INACTIVE"]]

    inside = shell("sbatch --parsable --reservation=demo -G 2 -t 10 --wrap 'sleep 300'")
    assert inside.returncode == 0, inside.stderr
    job_id = int(inside.stdout)
    assert sorted(running(client, job_id)["gpu_ids"]) == [0, 1]
    assert shell(f"squeue -h -j {job_id} -o '%i %v'").stdout.split() == [str(job_id), "demo"]
    assert "   Reservation=demo\n" in shell(f"scontrol show job {job_id}").stdout
    waits = shell("sbatch --parsable --reservation=later -G 1 -t 10 --wrap 'sleep 300'")
    later_id = int(waits.stdout)
    assert waiting(client, later_id)["reason"] == "Reservation"
    start = shell(f"squeue --start -h -j {later_id} -o '%i %S %r'").stdout.split()
    assert start[0] == str(later_id) and start[1] != "N/A" and start[2] == "Reservation"

    bad = shell("sbatch --reservation=nope --wrap true")
    assert bad.returncode == 1 and "Batch job submission failed:" in bad.stderr
    assert "Requested reservation is invalid" in bad.stderr
    busy = shell("scontrol delete reservation demo")
    assert busy.returncode == 1 and busy.stderr.startswith("delete_reservation reservation: ")
    assert "has jobs running in it" in busy.stderr
    assert shell("scontrol show reservation nope").stdout == "Reservation nope not found\n"
    refused = shell("scontrol create reservation ReservationName=x Duration=60 Users=root TRES=gres/gpu=9")
    assert refused.returncode == 1 and refused.stderr.startswith("Error creating the reservation: ")
    assert "cannot reserve 9" in refused.stderr
    bad_cores = shell("scontrol create reservation ReservationName=x Duration=60 Users=root CoreCnt=two")
    assert bad_cores.returncode == 1 and 'CoreCnt count (give a whole number, e.g. CoreCnt=4)' in bad_cores.stderr
    client.cancel(later_id)
    deleted = shell("scontrol delete ReservationName=later")
    assert deleted.returncode == 0 and deleted.stdout == "", deleted.stderr
    assert [r["name"] for r in client.reservations()] == ["demo"]
    client.cancel(job_id)


def test_scontrol_update_reservation_changes_its_window_gpus_and_users_and_keeps_its_jobs_gpus(
        server_factory, slurm_shell):
    server = server_factory(gpus=4, extra=ROOMY)
    client = server.client()
    shell = slurm_shell(server.home)
    client.create_reservation(name="demo", gpus=2, users=["root"], duration="1h")
    job_id = int(shell("sbatch --parsable --reservation=demo -G 2 -t 10 --wrap 'sleep 300'").stdout)
    assert sorted(running(client, job_id)["gpu_ids"]) == [0, 1]

    longer = shell("scontrol update ReservationName=demo Duration=3:00:00 Users+=nobody")
    assert (longer.returncode, longer.stdout) == (0, "Reservation updated.\n"), longer.stderr
    (demo,) = client.reservations()
    assert (demo["duration_s"], demo["users"], demo["gpus"]) == (3 * 3600, ["root", "nobody"], [0, 1])
    shrink = shell("scontrol update ReservationName=demo TRES=gres/gpu=1")
    assert shrink.returncode == 1 and shrink.stderr.startswith("Error updating the reservation: ")
    assert f"would leave out GPUs its jobs run on (job {job_id} runs on GPU 1)" in shrink.stderr
    grow = shell("scontrol update ReservationName=demo TRES=gres/gpu=3 Users-=nobody")
    assert grow.returncode == 0, grow.stderr
    (demo,) = client.reservations()
    assert (demo["gpus"], demo["users"], demo["duration_s"]) == ([0, 1, 2], ["root"], 3 * 3600)
    # a job outside the reservation now finds GPU 3 alone free
    outside = int(shell("sbatch --parsable -G 1 -t 10 --wrap 'sleep 300'").stdout)
    assert running(client, outside)["gpu_ids"] == [3]

    assert "not supported by corral: Nodes=x" in shell("scontrol update ReservationName=demo Nodes=x").stderr
    missing = shell("scontrol update ReservationName=nope Duration=10")
    assert missing.returncode == 1 and "Requested reservation is invalid" in missing.stderr
    moved = corral(server, "reservation", "update", "demo", "--duration", "30")
    assert moved.exit_code == 0 and moved.output.startswith("Reservation updated: demo ("), moved.output
    assert client.reservations()[0]["duration_s"] == 30 * 60
    renamed = corral(server, "reservation", "update", "demo", "--users", "root,nobody", "--json")
    assert renamed.exit_code == 0 and '"nobody"' in renamed.output
    client.cancel(job_id)
    client.cancel(outside)


@pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")
def test_a_user_who_is_no_admin_may_not_create_or_delete_a_reservation_with_scontrol(
        server_factory, slurm_shell, os_users, shared_dir):
    alice, _ = os_users
    server = server_factory(gpus=4, extra=ROOMY, home=os.path.join(shared_dir, "home"))
    client = server.client()
    client.create_reservation(name="roots", gpus=1, users=["root"], duration="1h")
    token = client.create_token(user=alice, scope="submit", expires="1h")["token"]
    shell = slurm_shell(server.home)
    refused = shell("scontrol create reservation ReservationName=mine Duration=60 Users=root TRES=gres/gpu=1",
                    CORRAL_TOKEN=token)
    assert refused.returncode == 1 and "Error creating the reservation: Access/permission denied" in refused.stderr
    refused = shell("scontrol delete reservation roots", CORRAL_TOKEN=token)
    assert refused.returncode == 1 and "Access/permission denied" in refused.stderr
    refused = shell(f"scontrol update ReservationName=roots Users+={alice}", CORRAL_TOKEN=token)
    assert refused.returncode == 1 and "Access/permission denied" in refused.stderr
    assert [(r["name"], r["users"]) for r in client.reservations()] == [("roots", ["root"])]
