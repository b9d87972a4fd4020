"""`scontrol show ...` against the real Slurm 22.05.8's output (tests/cli/slurm/golden/), filled from the same jobs."""

from __future__ import annotations

from typing import Any

import pytest

from corral.cli.slurm import hostlist
from corral.cli.slurm import scontrol_format as sf
from corral.cli.slurm.scontrol_config import show_config
from corral.cli.slurm.values import parse_iso
from tests.cli.slurm.goldens import golden

pytestmark = pytest.mark.usefixtures("testbed_clock")

ROOT = {"root": (0, "root", 0)}


def pairs(text: str) -> list[list[tuple[str, str]]]:
    """Each line's `Key=Value` pairs (a value may hold `=`, as TRES=cpu=1,...)."""
    out = []
    for line in text.split("\n"):
        out.append([(word.partition("=")[0], word.partition("=")[2]) for word in line.split(" ") if word])
    return out


def keys(text: str) -> list[list[str]]:
    return [[key for key, _ in line] for line in pairs(text)]


def values(text: str) -> dict[str, str]:
    return {key: value for line in pairs(text) for key, value in line}


def job(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": 1, "ref": "1", "array_job_id": None, "array_task_id": None, "array": None, "name": "x", "user": "root",
        "state": "PENDING", "reason": None, "exit_code": None, "signal": None, "command": [], "script_args": [],
        "gpus": 0, "nodes": 1, "gpu_type": None, "cpus": 1, "mem_mb": 1024, "time_limit_s": None, "nice": 0,
        "partition": "debug", "account": "root", "qos": "normal", "held": False, "restarts": 0, "dependency": None,
        "node": None, "workdir": "/tmp/sc", "submit_time": "2026-11-24T23:35:47.000Z", "start_time": None,
        "estimated_start": None, "end_time": None, "stdout_path": "", "stderr_path": "",
    }
    base.update(fields)
    return base


def show(j: dict[str, Any], now: str = "2026-11-24T23:40:00Z", **kw: Any) -> str:
    return sf.show_job(j, now=parse_iso(now) or 0.0, user_ids=ROOT.__getitem__, **kw)


# Slurm's AllocNode:Sid has the submitting shell's session id (corral has none: 0), and a job that
# asked no memory shows MinMemoryCPU (Slurm's DefMemPerCPU); corral's memory is the job's: MinMemoryNode.
# Times of Slurm's own scheduling passes (eligible, accruing, last evaluated) differ by a second or a pass.
DIFFERENT = {"AllocNode:Sid", "MinMemoryCPU", "MinMemoryNode", "LastSchedEval", "Scheduler", "Priority",
             "EligibleTime", "AccrueTime"}


def same_record(ours: str, theirs: str) -> None:
    ours_keys = [[k.replace("MinMemoryNode", "MinMemoryCPU") for k in line] for line in keys(ours)]
    assert ours_keys == keys(theirs)
    mine, real = values(ours), values(theirs)
    for key in real:
        if key not in DIFFERENT:
            assert mine[key] == real[key], key


def test_held_pending_job_is_slurms_record() -> None:
    ours = show(job(id=73, name="held", state="PENDING", reason="JobHeldUser", held=True,
                    stdout_path="/tmp/sc/slurm-73.out", stderr_path="/tmp/sc/slurm-73.out"))
    theirs = golden("scontrol_show_job_pending_held.txt")
    same_record(ours, theirs)
    assert "Priority=0 " in ours  # a held job's priority is 0, as scripts test
    assert ours.endswith("   Power=\n   \n\n")  # the record's trailing separator and blank line


def test_running_gpu_job_shows_times_node_and_gpus() -> None:
    theirs = golden("scontrol_show_job_gpu_running.txt")
    ours = show(job(id=77, name="sleeper", state="RUNNING", partition="gpu", gpus=2, time_limit_s=600,
                    submit_time="2026-11-24T23:35:48Z", start_time="2026-11-24T23:36:36Z", node="vm",
                    workdir="/tmp/sq", stdout_path="/tmp/sq/slurm-77.out", stderr_path="/tmp/sq/slurm-77.out"),
                now="2026-11-24T23:37:20Z")
    same_record(ours, theirs)
    assert "RunTime=00:00:44 TimeLimit=00:10:00" in ours
    assert "\n   TresPerNode=gres:gpu:2\n" in ours


def test_completed_array_task_names_its_array() -> None:
    theirs = golden("scontrol_show_job_array_task.txt")
    ours = show(job(id=84, ref="70_2", array_job_id=70, array_task_id=2, array="0-5%2", name="arr",
                    state="COMPLETED", exit_code=0, submit_time="2026-11-24T23:35:45Z",
                    start_time="2026-11-24T23:36:04Z", end_time="2026-11-24T23:36:19Z", node="vm",
                    workdir="/tmp/sacctjobs", stdout_path="/tmp/sacctjobs/slurm-70_2.out",
                    stderr_path="/tmp/sacctjobs/slurm-70_2.out"))
    same_record(ours, theirs)
    assert ours.startswith("JobId=84 ArrayJobId=70 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=arr\n")


def test_pending_array_shows_its_waiting_tasks() -> None:
    theirs = golden("scontrol_show_job_array_pending.txt")
    ours = show(job(id=78, ref="78_[0-3]", array_job_id=78, array="0-3%2", name="arr"))
    assert ours.split("\n")[0] == theirs.split("\n")[0]


def test_script_job_with_memory_and_cpus() -> None:
    theirs = golden("scontrol_show_job_gpu_held.txt")
    ours = show(job(id=87, name="gpujob", reason="JobHeldUser", held=True, partition="gpu", gpus=1, cpus=2,
                    mem_mb=2048, time_limit_s=600, command=["/tmp/sc/job.sh"], submit_time="2026-11-24T23:36:31Z",
                    stdout_path="/tmp/sc/slurm-87.out", stderr_path="/tmp/sc/slurm-87.out"))
    assert keys(ours) == keys(theirs)
    mine, real = values(ours), values(theirs)
    for key in ("NumCPUs", "CPUs/Task", "TRES", "MinCPUsNode", "MinMemoryNode", "TimeLimit", "Command",
                "TresPerNode", "StdOut", "JobState", "Reason", "EndTime"):
        assert mine[key] == real[key], key


def test_one_liner_is_one_line_with_slurms_keys() -> None:
    theirs = golden("scontrol_show_job_o.txt")
    ours = show(job(id=73, name="held", reason="JobHeldUser", held=True, stdout_path="/tmp/sc/slurm-73.out",
                    stderr_path="/tmp/sc/slurm-73.out"), one_liner=True)
    assert ours.count("\n") == 1 and ours.endswith("Power= \n")
    assert [k.replace("MinMemoryNode", "MinMemoryCPU") for k in keys(ours)[0]] == keys(theirs)[0]


def test_reason_spaces_become_underscores_and_signals_show_in_exit_code() -> None:
    ours = show(job(state="FAILED", reason="Nodes required for job are DOWN", exit_code=0, signal=9,
                    start_time="2026-11-24T23:36:00Z", end_time="2026-11-24T23:37:00Z", node="vm"))
    assert "Reason=Nodes_required_for_job_are_DOWN " in ours
    assert "ExitCode=0:9" in ours
    assert "RunTime=00:01:00" in ours


def test_no_jobs() -> None:
    assert sf.show_jobs([], now=0) == sf.NO_JOBS == "No jobs in the system\n"


def test_jobs_are_separated_by_a_blank_line() -> None:
    text = sf.show_jobs([job(id=1), job(id=2)], now=parse_iso("2026-11-24T23:40:00Z") or 0.0,
                        user_ids=ROOT.__getitem__)
    assert text.count("\n\nJobId=2 ") == 1


NODE = {"name": "vm", "arch": "X86_64", "cpus": 2, "cpus_alloc": 1, "mem_mb": 21695, "mem_alloc_mb": 1024,
        "gpus": [{"index": i, "type": None} for i in range(4)]}


def test_show_node_is_slurms_record() -> None:
    theirs = golden("scontrol_show_node.txt")
    ours = sf.show_node(NODE, partitions=["debug", "gpu"], now=parse_iso("2026-11-24T23:35:55Z") or 0.0,
                        os_name="Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0", cpu_load=4.44,
                        boot_time=parse_iso("2026-11-24T23:04:53Z"), start_time=parse_iso("2026-11-24T23:28:12Z"))
    assert keys(ours) == keys(theirs)
    mine, real = values(ours), values(theirs)
    for key, value in real.items():
        if key not in ("NodeAddr", "FreeMem", "LastBusyTime"):  # corral knows no address or free memory
            assert mine[key] == value, key
    assert ours.endswith("ExtSensorsTemp=n/s\n\n")


def test_show_node_one_liner() -> None:
    theirs = golden("scontrol_show_node_o.txt")
    ours = sf.show_node(NODE, partitions=["debug", "gpu"], now=0, one_liner=True, cpu_load=4.44,
                        os_name="Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0")
    assert keys(ours) == keys(theirs)


@pytest.mark.parametrize(("alloc", "declared", "state"), [
    (0, None, "IDLE"), (1, None, "MIXED"), (2, None, "ALLOCATED"), (0, "drain", "DRAINED"),
    (1, "drain", "DRAINING"), (0, "down", "DOWN"),
])
def test_node_states(alloc: int, declared: str | None, state: str) -> None:
    assert sf.node_state({**NODE, "cpus_alloc": alloc, "state": declared}) == state


def test_show_partition_is_slurms_text() -> None:
    parts = [{"name": "debug", "default": True}, {"name": "gpu"}]
    assert sf.show_partitions(parts, [NODE]) == golden("scontrol_show_partition.txt")


def test_partition_limits_and_access() -> None:
    text = sf.show_partition({"name": "long", "max_time_s": 2 * 86400, "default_time_s": 3600, "tier": 2,
                              "priority_factor": 5, "allowed_groups": ["lab"]}, [NODE], default="debug")
    assert "AllowGroups=lab " in text
    assert "Default=NO " in text
    assert "DefaultTime=01:00:00 " in text and "MaxTime=2-00:00:00 " in text
    assert "PriorityJobFactor=5 PriorityTier=2 " in text


def test_show_config_keeps_slurms_layout() -> None:
    theirs = golden("scontrol_show_config.txt").split("\n")
    ours = show_config({"ClusterName": "corral", "PriorityWeightAge": 1000}, now=0,
                          controller="vm").split("\n")
    assert ours[0].startswith("Configuration data as of ")
    their_keys = [line.split(" = ")[0].rstrip() for line in theirs[1:] if " = " in line or line.endswith(" =")]
    our_keys = [line.split(" = ")[0].rstrip() for line in ours[1:] if " = " in line]
    # corral computes priority/multifactor: its rows replace basic's PriorityType row; memory is per node
    multifactor = {key for key in our_keys if key.startswith("Priority")} - {
        "PriorityParameters", "PrioritySiteFactorParameters", "PrioritySiteFactorPlugin"}
    assert [k for k in our_keys if k not in multifactor and k != "DefMemPerNode"] == [
        k for k in their_keys if k not in ("PriorityType", "DefMemPerCPU", "MULTIPLE_SLURMD")]  # a build option
    assert "ClusterName             = corral" in ours
    assert "SLURM_VERSION           = 22.05.8" in ours
    assert "PriorityWeightAge       = 1000" in ours
    assert ours[-3:] == ["", "Slurmctld(primary) at vm is UP", ""]


def test_hostnames_as_slurm_expands_them() -> None:
    assert hostlist.hostnames("node[1-3,5],gpu0[8-10]") == golden("scontrol_show_hostnames.txt")


def test_hostlist_round_trip() -> None:
    names = ["node1", "node2", "node3", "node5", "gpu08", "gpu09", "gpu10", "vm"]
    text = hostlist.compress_hostlist(names)
    assert text == "gpu[08-10],node[1-3,5],vm"
    assert sorted(hostlist.expand_hostlist(text)) == sorted(names)


def test_pending_job_shows_its_expected_start_and_end() -> None:
    theirs = values(golden("scontrol_show_job_gpu_pending.txt"))
    ours = values(show(job(id=77, name="sleeper", partition="gpu", gpus=2, time_limit_s=600,
                           submit_time="2026-11-24T23:35:48Z", estimated_start="2027-11-24T23:36:20Z")))
    for key in ("StartTime", "EndTime", "RunTime", "TimeLimit", "NodeList", "TresPerNode", "JobState"):
        assert ours[key] == theirs[key], key


def test_running_job_without_limit_has_no_end() -> None:
    theirs = golden("scontrol_show_job_running.txt")
    ours = show(job(id=86, ref="70_4", array_job_id=70, array_task_id=4, array="0-5%2", name="arr",
                    state="RUNNING", submit_time="2026-11-24T23:35:45Z", start_time="2026-11-24T23:36:20Z",
                    node="vm", workdir="/tmp/sacctjobs", stdout_path="/tmp/sacctjobs/slurm-70_4.out",
                    stderr_path="/tmp/sacctjobs/slurm-70_4.out"), now="2026-11-24T23:36:26Z")
    same_record(ours, theirs)
    assert "EndTime=Unknown " in ours


FIELDS = {"comment": None, "begin_time": None, "deadline": None, "exclusive": False, "features": None, "nodelist": [],
          "exclude": [], "mail_type": [], "mail_user": None, "time_min_s": None, "fixed_priority": None}


def test_sbatch_when_where_and_mail_fields_show_where_slurm_puts_them() -> None:
    # sbatch -H --comment="hello world" --begin=... --deadline=... --exclusive --nodelist=vm
    #        --mail-type=END,FAIL --mail-user=a@b.c --time=30 --time-min=10 -J fields
    theirs = golden("scontrol_show_job_fields_pending.txt")
    ours = show(job(**FIELDS | {
        "id": 2, "name": "fields", "reason": "JobHeldUser", "held": True, "time_limit_s": 1800, "time_min_s": 600,
        "comment": "hello world", "begin_time": "2026-11-26T10:00:00.000Z", "deadline": "2026-11-28T12:00:00.000Z",
        "exclusive": True, "nodelist": ["vm"], "mail_type": ["END", "FAIL"], "mail_user": "a@b.c",
        "command": ["/tmp/sf/job.sh"], "workdir": "/tmp/sf", "submit_time": "2026-11-25T01:53:00Z",
        "stdout_path": "/tmp/sf/slurm-2.out", "stderr_path": "/tmp/sf/slurm-2.out"}), now="2026-11-25T01:53:20Z")
    same_record(ours, theirs)
    # a held job with a --begin: eligible, accruing and expected to start at its begin, as Slurm says
    assert "EligibleTime=2026-11-26T10:00:00\n   AccrueTime=2026-11-26T10:00:00\n" in ours
    assert "\n   Comment=hello world \n" in ours and ours.endswith("Power=\n   MailUser=a@b.c MailType=END,FAIL\n   \n\n")


def test_running_exclusive_job_with_features_priority_and_time_min() -> None:
    # sbatch --comment="run note" --deadline=... --exclusive --constraint=gpu --nodelist=vm --mail-type=END
    #        --mail-user=x@y.z --time=30 --time-min=10 --priority=100 -J runner
    theirs = golden("scontrol_show_job_fields_running.txt")
    ours = show(job(**FIELDS | {
        "id": 7, "name": "runner", "state": "RUNNING", "time_limit_s": 1800, "time_min_s": 600, "node": "vm",
        "comment": "run note", "deadline": "2026-11-28T12:00:00Z", "exclusive": True, "features": "gpu",
        "nodelist": ["vm"], "mail_type": ["END"], "mail_user": "x@y.z", "fixed_priority": 100,
        "command": ["/tmp/sf/job.sh"], "workdir": "/tmp/sf", "submit_time": "2026-11-25T01:53:14Z",
        "start_time": "2026-11-25T01:53:14Z", "stdout_path": "/tmp/sf/slurm-7.out",
        "stderr_path": "/tmp/sf/slurm-7.out"}), now="2026-11-25T01:53:29Z")
    # Slurm counts an --exclusive job's CPUs and memory as the whole node's; corral shows what the job asked
    real = {key: value for key, value in values(theirs).items() if key not in ("NumCPUs", "TRES")}
    assert [[k.replace("MinMemoryNode", "MinMemoryCPU") for k in line] for line in keys(ours)] == keys(theirs)
    mine = values(ours)
    for key, value in real.items():
        if key not in DIFFERENT:
            assert mine[key] == value, key
    assert "\n   Priority=100 " in ours  # a running job keeps the --priority it was given
    assert "StartTime=2026-11-25T01:53:14 EndTime=2026-11-25T02:23:14 Deadline=2026-11-28T12:00:00" in ours


def test_mail_types_in_slurms_order_and_all_spelled_as_slurm() -> None:
    assert sf.mail_type_text(["TIME_LIMIT", "ARRAY_TASKS", "TIME_LIMIT_50", "BEGIN", "TIME_LIMIT_80",
                              "TIME_LIMIT_90"]) == "ARRAY_TASKS,BEGIN,TIME_LIMIT_50,TIME_LIMIT_80,TIME_LIMIT_90,TIME_LIMIT"
    assert sf.mail_type_text(["BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND"]) == (
        "INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT")  # sbatch --mail-type=ALL on the testbed
def test_a_multi_task_jobs_record_counts_its_tasks_as_slurm_does():
    from corral.cli.slurm.scontrol_format import show_job

    job = {"id": 39, "ref": "39", "name": "wrap", "user": "root", "state": "PENDING", "cpus": 2, "nodes": 1,
           "ntasks": 2, "ntasks_per_node": None, "gpus": 2, "gpus_per_task": 1, "mem_mb": 2048, "command": [],
           "submit_time": "2026-11-25T02:30:00Z", "partition": "debug", "qos": "normal"}
    text = show_job(job, now=0.0)
    # captured from Slurm 22.05: sbatch -n 2 --gpus-per-task=1
    assert "   NumNodes=1 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*\n" in text
    assert "   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n" in text
    assert "   MinCPUsNode=1 " in text and "   TresPerTask=gres:gpu:1\n" in text
    text = show_job({**job, "ntasks_per_node": 2, "gpus": 0, "gpus_per_task": None}, now=0.0)
    assert "   Socks/Node=* NtasksPerN:B:S:C=2:0:*:* CoreSpec=*\n" in text
