"""sacct's and seff's text from corral's job JSON, compared with what the real Slurm 22.05.8 printed.

The golden files were captured on the testbed (cluster `corral`, node `vm`, time zone UTC) for jobs 67
(completed, 200 MB), 68 (`exit 3`), 69 (cancelled while running), 71 (pending) and array 70 (`-a 0-5%2`).
The jobs here are those same jobs as corral's API shows them, read back from the `-P` capture.
seff is not installed on the testbed: `seff_67.derived.txt` is what contribs/seff/seff (22.05.8) prints
for job 67's accounting record, worked through by hand from the script's source.
"""

from __future__ import annotations

from typing import Any

import pytest

from corral.cli.slurm.sacct_format import format_sacct, parse_fields
from corral.cli.slurm.seff_format import format_seff
from tests.cli.slurm.goldens import golden

pytestmark = pytest.mark.usefixtures("testbed_clock")


def _iso(stamp: str) -> str | None:
    return None if stamp in ("Unknown", "None") else stamp + "+00:00"


def _seconds(clock: str) -> float:
    minutes_seconds = clock.split(":")
    if "." in clock:  # MM:SS.mmm
        return int(minutes_seconds[0]) * 60 + float(minutes_seconds[1])
    hours, minutes, seconds = (int(part) for part in minutes_seconds)
    return hours * 3600 + minutes * 60 + seconds


def _limit(text: str) -> int | None:
    if text in ("UNLIMITED", "Partition_Limit"):
        return None
    days, _, clock = text.rpartition("-")
    return int(days or 0) * 86400 + int(_seconds(clock))


def jobs_from_capture(name: str = "sacct_P_o_many.txt") -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """The captured jobs as corral's job dicts and usage, in sacct's order."""
    lines = golden(name).splitlines()
    header = lines[0].split("|")
    rows = [dict(zip(header, line.split("|"))) for line in lines[1:]]
    jobs: list[dict[str, Any]] = []
    usage: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row["JobID"].endswith(".batch"):
            job_id = int(row["JobIDRaw"].split(".")[0])
            rss = row["MaxRSS"]
            usage.setdefault(job_id, {})["max_rss_mb"] = int(rss[:-1]) / 1024 if rss else None
            continue
        code, signal = (int(part) for part in row["ExitCode"].split(":"))
        ref = row["JobID"]
        task = ref.partition("_")[2]
        state = row["State"].split(" ")[0]
        limit = row["Timelimit"]
        jobs.append({
            "id": int(row["JobIDRaw"]), "ref": ref, "name": row["JobName"], "user": row["User"],
            "state": state, "exit_code": code, "signal": 15 if state == "CANCELLED" else signal,
            "array_job_id": int(ref.split("_")[0]) if task.isdigit() else None,
            "array_task_id": int(task) if task.isdigit() else None,
            "partition": row["Partition"], "account": row["Account"], "cpus": int(row["AllocCPUS"]),
            "mem_mb": int(row["ReqMem"][:-1]) * (1024 if row["ReqMem"].endswith("G") else 1), "gpus": 0,
            "nodes": 1, "node": None if row["NodeList"] == "None assigned" else row["NodeList"],
            "time_limit_s": _limit(limit),
            "submit_time": _iso(row["Submit"]), "start_time": _iso(row["Start"]), "end_time": _iso(row["End"]),
            "reason": None, "qos": "normal", "workdir": "/root",
        })
        if row["End"] != "Unknown":
            usage.setdefault(int(row["JobIDRaw"]), {})["cpu_time_s"] = _seconds(row["TotalCPU"])
    return jobs, usage


def now_of(jobs: list[dict[str, Any]], running_elapsed: int) -> float:
    """The moment of a capture: the running job's start plus the Elapsed sacct showed for it then."""
    from corral.cli.slurm.values import parse_iso

    running = next(job for job in jobs if job["state"] == "RUNNING")
    start = parse_iso(running["start_time"])
    assert start is not None
    return start + running_elapsed


JOBS, USAGE = jobs_from_capture()
NOW = now_of(JOBS, 13)
MANY = ("JobID,JobIDRaw,JobName,User,Partition,Account,State,ExitCode,Elapsed,Start,End,Submit,NodeList,"
        "AllocCPUS,AllocTRES,ReqTRES,ReqMem,MaxRSS,TotalCPU,CPUTime,Timelimit")


def test_default_columns_and_their_widths_match_slurm_with_a_batch_step_per_started_job() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW) == golden("sacct_default.txt")


def test_allocations_leave_out_the_step_lines() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW, allocations=True) == golden("sacct_X.txt")


def test_parsable2_with_many_fields_matches_slurm_value_for_value() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW, fields=MANY, parsable="") == golden("sacct_P_o_many.txt")


def test_many_fields_in_columns_cut_long_text_with_a_plus_but_never_times() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW, fields=MANY) == golden("sacct_o_many.txt")


def test_parsable_ends_every_line_with_a_bar() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW, parsable="|") == golden("sacct_p.txt")


def test_noheader_and_brief() -> None:
    assert format_sacct(JOBS, USAGE, now=NOW, noheader=True) == golden("sacct_n.txt")
    assert format_sacct(JOBS, USAGE, now=NOW, brief=True) == golden("sacct_b.txt")


def test_width_suffixes_right_justify_and_a_minus_left_justifies() -> None:
    fields = "jobid%20,JOBNAME%30,state%-14,exitcode,maxrss%5"
    assert format_sacct(JOBS, USAGE, now=NOW, fields=fields) == golden("sacct_o_widths.txt")


def test_field_names_match_by_prefix_in_slurms_table_order() -> None:
    fields = "jobn,st,exit,elapsedr,cputimer,nnodes,ntasks,reqcpus,group,uid"
    assert [name for name, _, _ in parse_fields(fields)][:2] == ["JobName", "Start"]  # `st` is Start, as in Slurm
    jobs, usage = jobs_from_capture()
    ours = format_sacct(jobs, usage, now=now_of(jobs, 14), fields=fields, parsable="|").splitlines()
    theirs = golden("sacct_o_prefix.txt").splitlines()
    assert len(ours) == len(theirs)
    for mine, real in zip(ours, theirs):
        # Group is the owner's group, which the job JSON does not carry: corral leaves it empty
        assert mine.split("|")[:8] == real.split("|")[:8]
        assert mine.split("|")[9:] == real.split("|")[9:]


def test_what_submitit_reads() -> None:
    # submitit: sacct -o JobID,State,NodeList --parsable2 -j 67 -j 70 -j 71
    picked = [job for job in JOBS if job["id"] in (67, 71) or job["ref"].startswith("70_")]
    assert format_sacct(picked, USAGE, now=NOW, fields="JobID,State,NodeList", parsable="") == golden(
        "sacct_submitit.txt")


def test_long_format_header_and_the_fields_corral_knows() -> None:
    ours = format_sacct(JOBS, USAGE, now=now_of(JOBS, 14), long=True, parsable="").splitlines()
    theirs = golden("sacct_l_P.txt").splitlines()
    assert ours[0] == theirs[0]
    header = theirs[0].split("|")
    known = ["JobID", "JobIDRaw", "JobName", "Partition", "MaxRSS", "MaxRSSNode", "MaxRSSTask", "AveRSS",
             "NTasks", "AllocCPUS", "Elapsed", "State", "ExitCode", "ReqCPUFreqMin", "ReqCPUFreqMax",
             "ReqCPUFreqGov", "ReqMem", "ConsumedEnergy", "ReqTRES", "AllocTRES"]
    for mine, real in zip(ours[1:], theirs[1:]):
        got, want = dict(zip(header, mine.split("|"))), dict(zip(header, real.split("|")))
        assert {k: got[k] for k in known} == {k: want[k] for k in known}


def test_running_jobs_elapsed_comes_from_now_and_their_steps_show_no_usage_yet() -> None:
    jobs, usage = jobs_from_capture("sacct_P_o_many_running.txt")
    ours = format_sacct(jobs, usage, now=now_of(jobs, 11), fields=MANY, parsable="")
    assert ours == golden("sacct_P_o_many_running.txt")
    assert format_sacct(jobs, usage, now=now_of(jobs, 11), fields=MANY) == golden("sacct_o_many_running.txt")


def test_spellings_slurm_uses_for_states_exit_codes_and_gpus() -> None:
    job = dict(JOBS[0], id=90, ref="90", state="FAILED", exit_code=0, signal=9, gpus=1, mem_mb=4000)
    line = format_sacct([job], {}, now=NOW, fields="JobID,State,ExitCode,AllocTRES,ReqMem,Timelimit",
                        parsable="", noheader=True, allocations=True)
    assert line == "90|FAILED|0:9|billing=1,cpu=1,gres/gpu=1,mem=4000M,node=1|4000M|UNLIMITED\n"
    timed = dict(JOBS[0], state="TIMEOUT", time_limit_s=3600, signal=15)
    out = format_sacct([timed], USAGE, now=NOW, fields="JobID,State,ExitCode,Timelimit", parsable="", noheader=True)
    assert out == "67|TIMEOUT|0:0|01:00:00\n67.batch|CANCELLED|0:15|\n"
    out = format_sacct([dict(JOBS[2])], USAGE, now=NOW, fields="State", parsable="", noheader=True,
                       allocations=True, uids={"root": 1000})
    assert out == "CANCELLED by 1000\n"


def test_cpu_times_are_spelt_as_slurm_spells_them() -> None:
    job = dict(JOBS[0], cpus=4)
    for seconds, total in ((7.911, "00:07.911"), (303.0, "00:05:03"), (3903.5, "01:05:03"),
                           (180303.0, "2-02:05:03")):
        out = format_sacct([job], {67: {"cpu_time_s": seconds, "max_rss_mb": 4096}}, now=NOW,
                           fields="TotalCPU,MaxRSS,CPUTime", parsable="", noheader=True)
        assert out == f"{total}||00:00:32\n{total}|4G|00:00:32\n"


def test_an_unknown_field_is_refused_in_slurms_words() -> None:
    with pytest.raises(ValueError, match='Invalid field requested: "Bogus"'):
        format_sacct(JOBS, USAGE, now=NOW, fields="JobID,Bogus")


def test_seff_of_a_completed_job_follows_the_seff_script() -> None:
    job = JOBS[0]
    efficiency = {"state": "COMPLETED", "elapsed_s": 8.0, "cpus": 1, "cpu_time_s": 7.911,
                  "max_rss_mb": 219792 / 1024, "mem_requested_mb": 1024}
    assert format_seff(job, efficiency, cluster="corral", now=NOW) == golden("seff_67.derived.txt")


def test_seff_of_array_tasks_running_and_pending_jobs() -> None:
    running = next(job for job in JOBS if job["state"] == "RUNNING")
    text = format_seff(running, {"cpus": 1, "cpu_time_s": None, "max_rss_mb": None}, cluster="corral",
                       now=NOW, group="wheel")
    assert text.splitlines() == [
        "Job ID: 70", "Array Job ID: 70_5", "Cluster: corral", "User/Group: root/wheel", "State: RUNNING",
        "Cores: 1", "CPU Utilized: 00:00:00", "CPU Efficiency: 0.00% of 00:00:13 core-walltime",
        "Job Wall-clock time: 00:00:13", "Memory Utilized: 0.00 MB (estimated maximum)",
        "Memory Efficiency: 0.00% of 1.00 GB (1.00 GB/node)",
        "WARNING: Efficiency statistics may be misleading for RUNNING jobs.",
    ]
    pending = next(job for job in JOBS if job["state"] == "PENDING")
    assert format_seff(pending, None, cluster="corral", now=NOW).splitlines()[-3:] == [
        "Nodes: 1", "Cores per node: 2", "Efficiency not available for jobs in the PENDING state."]
    failed = format_seff(JOBS[1], {"elapsed_s": 2, "cpus": 1, "cpu_time_s": 0.002, "max_rss_mb": 3296 / 1024},
                         cluster="corral", now=NOW)
    assert "State: FAILED (exit code 3)\n" in failed and "Memory Utilized: 3.22 MB\n" in failed


def test_a_job_cancelled_while_pending_started_none_and_has_no_step() -> None:
    jobs, usage = jobs_from_capture("sacct_P_o_many_cancelled_pending.txt")
    assert format_sacct(jobs, usage, now=NOW, fields=MANY, parsable="") == golden(
        "sacct_P_o_many_cancelled_pending.txt")
    assert format_sacct(jobs, usage, now=NOW) == golden("sacct_default_cancelled_pending.txt")


def test_timeout_and_a_signal_kill_read_as_slurm_reads_them_their_steps_cancelled() -> None:
    # 90: -t 1 past its limit; 91: `kill -9 $$`; 92: held then released; 93: --mem=4000 (no gres TRES recorded here)
    jobs, usage = jobs_from_capture("sacct_P_o_many_timeout_signal_gpu.txt")
    assert format_sacct(jobs, usage, now=NOW, fields=MANY, parsable="") == golden(
        "sacct_P_o_many_timeout_signal_gpu.txt")
    assert format_sacct(jobs, usage, now=NOW) == golden("sacct_default_timeout_signal_gpu.txt")


def test_brief_and_long_add_their_columns_after_format_as_slurm_does() -> None:
    out = format_sacct(JOBS[:1], USAGE, now=NOW, fields="jobname", brief=True, parsable="", allocations=True)
    assert out == "JobName|JobID|State|ExitCode\nok|67|COMPLETED|0:0\n"


def _sbatch_fields_job(**fields: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "array_job_id": None, "array_task_id": None, "array": None, "user": "root", "reason": None, "held": False,
        "gpus": 0, "nodes": 1, "gpu_type": None, "cpus": 1, "mem_mb": 1024, "time_limit_s": 1800, "nice": 0,
        "partition": "debug", "account": "root", "qos": "normal", "dependency": None, "node": None,
        "workdir": "/tmp/sf", "exit_code": None, "signal": None, "start_time": None, "estimated_start": None,
        "end_time": None, "comment": None, "begin_time": None, "features": None, "fixed_priority": None,
    }
    job.update(fields)
    return job


def test_sbatch_constraint_begin_and_priority_fields_match_slurm() -> None:
    # the jobs of squeue_fields_codes.txt: 2 held with --begin and --comment, 7 running with --constraint=gpu
    # and --priority=100 (sacct -X -j 2,7 -P -o ...)
    jobs = [
        _sbatch_fields_job(id=2, ref="2", name="fields", state="PENDING", reason="JobHeldUser", held=True,
                           comment="hello world", begin_time="2026-11-26T10:00:00Z",
                           submit_time="2026-11-25T01:53:00Z"),
        _sbatch_fields_job(id=7, ref="7", name="runner", state="RUNNING", node="vm", comment="run note",
                           features="gpu", fixed_priority=100, submit_time="2026-11-25T01:53:14Z",
                           start_time="2026-11-25T01:53:14Z"),
    ]
    fields = "JobID,Comment,Constraints,Start,End,Eligible,Submit,TimelimitRaw,Priority,Timelimit,NodeList"
    ours = format_sacct(jobs, {}, now=1795571609, fields=fields, parsable="", allocations=True).splitlines()
    theirs = golden("sacct_fields_P.txt").splitlines()
    # the testbed keeps no comments in its accounting (no AccountingStoreFlags=job_comment); corral keeps them
    assert [row.split("|")[1] for row in ours[1:]] == ["hello world", "run note"]
    assert [row.split("|")[:1] + row.split("|")[2:] for row in ours] == [
        row.split("|")[:1] + row.split("|")[2:] for row in theirs]
