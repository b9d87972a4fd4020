"""squeue's output against the real Slurm 22.05.8's, for the same queue.

golden/squeue/queue1 to queue5 hold what `squeue` printed on the Slurm testbed (capture.sh ran it), the
`scontrol show job -d` of that moment, and those jobs as corral's API JSON (jobs.json, made from it, with
Slurm's priorities); now.json says when each command ran. Each golden file must come out the same, line for
line and column for column, from the JSON alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from corral.cli.slurm.squeue_fields import mem_size
from corral.cli.slurm.squeue_format import (
    DEFAULT_FORMAT,
    LONG_FORMAT,
    format_squeue,
    parse_format,
)

pytestmark = pytest.mark.usefixtures("testbed_clock")
GOLDEN = Path(__file__).parent / "golden" / "squeue"
_O_MORE = "%A %a %k %m %f %q %Q %p %Z %o %E %N %L %y %h %O %H %I %J %z %x %w %K %F"
CASES: dict[str, dict[str, object]] = {
    "default.txt": {},
    "long.txt": {"long": True},
    "noheader.txt": {"noheader": True},
    "array.txt": {"array": True},
    "array_long.txt": {"array": True, "long": True},
    "start.txt": {"start": True},
    "o_codes.txt": {"fmt": "%i %j %u %T %t %M %l %D %R %P %C %b %S %e %V %r"},
    "o_widths.txt": {"fmt": "%.10i|%-10j|%10u|%5T|%.3t|%20R|%%|%C|%.4P|%-4j|"},
    "o_i.txt": {"fmt": "%i"},
    "o_literal.txt": {"fmt": "jobs: %i name=%j %%done"},
    "o_wide.txt": {"fmt": "%.100i %.50j"},
    "o_more.txt": {"fmt": _O_MORE},
    "r_ids.txt": {"array": True, "fmt": "%i %A %a %F %K %j %T %r"},
    "ids_collapsed.txt": {"fmt": "%i %F %K %A"},
    "O_names.txt": {"fmt_long": "JobID,Name,State,UserName,TimeUsed,TimeLimit,NumNodes,ReasonList,Partition,"
                                "NumCPUs,tres-per-node,StartTime,EndTime,SubmitTime,Reason"},
    "O_widths.txt": {"fmt_long": "JobID:5,Name:.10,State:20,UserName:.,Partition:3"},
    "O_widths2.txt": {"fmt_long": "JobID:5,Name:.10,State:20,UserName:.,Partition:3|"},
    "O_more.txt": {"fmt_long": "JobArrayID,ArrayJobID,ArrayTaskID,Priority,MinMemory,Dependency,Nice,QOS,WorkDir,"
                               "Command,MinCpus,NodeList,TimeLeft,STDOUT,GRES,tres-alloc,tres-per-job"},
    "S_i.txt": {"sort": "i"},
    "S_minus_i.txt": {"sort": "-i"},
    "S_minus_t.txt": {"sort": "-t"},
    "S_u_minus_i.txt": {"sort": "u,-i"},
    "S_P.txt": {"sort": "P"},
    "S_M.txt": {"sort": "M"},
    "S_S.txt": {"sort": "S"},
    "S_j.txt": {"sort": "j"},
}
# queue3-5: `squeue -t all` just after jobs ended: FAILED, TIMEOUT, COMPLETED beside pending and running ones
ENDED_CASES: dict[str, dict[str, object]] = {
    "all_default.txt": {},
    "all_long.txt": {"long": True},
    "all_codes.txt": {"fmt": "%i %T %t %r %R %M %l %L %S %e %V %D %C"},
}
# Job 82 asked for memory per CPU (1G for each of 2): Slurm's MIN_MEMORY shows the per-CPU figure, corral
# keeps one figure per job (2G), which is what its MIN_MEMORY shows. Everything else on that line matches.
KNOWN = {("o_more.txt", "82 "): (" 1G ", " 2G "), ("O_more.txt", "82 "): (" 1G   ", " 2G   ")}


def _queue(name: str) -> tuple[list[dict[str, object]], dict[str, int]]:
    jobs = json.loads((GOLDEN / name / "jobs.json").read_text())["jobs"]
    return jobs, json.loads((GOLDEN / name / "now.json").read_text())


def _expected(queue: str, case: str) -> list[str]:
    lines = (GOLDEN / queue / case).read_text().splitlines()
    for (file, row), (old, new) in KNOWN.items():
        if file == case:
            lines = [line.replace(old, new, 1) if line.startswith(row) else line for line in lines]
    return lines


@pytest.mark.parametrize("queue", ["queue1", "queue2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_slurm(queue: str, case: str) -> None:
    jobs, nows = _queue(queue)
    want = _expected(queue, case)
    # squeue reads the clock when it prints, which may be the second after the one noted before it ran
    tries = [format_squeue(jobs, now=nows[case] + late, node_name="vm", **CASES[case]).splitlines()  # type: ignore[arg-type]
             for late in (0, 1)]
    got = tries[0] if tries[0] == want else tries[1]
    assert len(got) == len(want)
    for got_line, want_line in zip(got, want):
        assert got_line == want_line


@pytest.mark.parametrize("queue", ["queue3", "queue4", "queue5"])
@pytest.mark.parametrize("case", sorted(ENDED_CASES))
def test_ended_jobs_match_slurm(queue: str, case: str) -> None:
    jobs, nows = _queue(queue)
    want = _expected(queue, case)
    tries = [format_squeue(jobs, now=nows[case] + late, node_name="vm", **ENDED_CASES[case]).splitlines()  # type: ignore[arg-type]
             for late in (0, 1)]
    assert want in tries


def _job(**fields: object) -> dict[str, object]:
    job: dict[str, object] = {
        "id": 12, "ref": "12", "array_job_id": None, "array_task_id": None, "array": None, "name": "train",
        "user": "ana", "state": "RUNNING", "reason": None, "gpus": 0, "nodes": 1, "gpu_type": None, "cpus": 4,
        "mem_mb": 16384, "time_limit_s": 3600, "nice": 0, "partition": "gpu", "account": None, "qos": None,
        "held": False, "dependency": None, "node": "box", "workdir": "/w", "command": ["python", "t.py"],
        "submit_time": "2026-11-24T10:00:00.000+00:00", "start_time": "2026-11-24T10:00:05.000+00:00",
        "estimated_start": None, "end_time": None, "stdout_path": "/w/slurm-12.out", "stderr_path": "/w/slurm-12.out",
    }
    job.update(fields)
    return job


NOW = 1795514530  # 2026-11-24T10:02:10 UTC: the running job above has run 2:05


def test_default_columns_and_header() -> None:
    out = format_squeue([_job()], now=NOW)
    assert out == ("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
                   "                12       gpu    train      ana  R       2:05      1 box\n")
    assert DEFAULT_FORMAT == "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"


def test_pending_jobs_show_their_reason_in_brackets() -> None:
    jobs = [_job(id=n, ref=str(n), state="PENDING", reason=reason, node=None, start_time=None)
            for n, reason in enumerate(["Resources", "Priority", "Dependency", "JobHeldUser", "BeginTime"], 20)]
    rows = format_squeue(jobs, now=NOW, fmt="%i %R", noheader=True, sort="i").splitlines()
    assert rows == ["20 (Resources)", "21 (Priority)", "22 (Dependency)", "23 (JobHeldUser)", "24 (BeginTime)"]


def test_long_starts_with_the_date_and_shows_state_and_limit() -> None:
    lines = format_squeue([_job()], now=NOW, long=True).splitlines()
    assert lines[0] == "Tue Nov 24 10:02:10 2026"
    assert lines[1].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME", "TIME_LIMI", "NODES",
                                "NODELIST(REASON)"]
    assert lines[2].split() == ["12", "gpu", "train", "ana", "RUNNING", "2:05", "1:00:00", "1", "box"]
    assert LONG_FORMAT.startswith("%.18i")
    assert format_squeue([_job()], now=NOW, long=True, noheader=True).count("\n") == 1


def test_noheader_with_no_jobs_prints_nothing() -> None:
    assert format_squeue([], now=NOW, noheader=True) == ""
    assert format_squeue([], now=NOW) == format_squeue([_job()], now=NOW).splitlines(keepends=True)[0]


def test_widths_truncate_as_slurm_does() -> None:
    job = _job(name="averyverylongname", time_limit_s=3 * 86400)
    # right-aligned cuts to the width, keeping the start; left-aligned pads; times are never cut
    assert format_squeue([job], now=NOW, fmt="%.5j|%5j|%.3l|%3l|%j", noheader=True) == (
        "avery|avery|3-00:00:00|3-0|averyverylongname\n")


def test_dash_and_double_percent_are_slurms() -> None:
    errors: list[str] = []
    # split at each %: `%-5j ` and `%|` are no fields, so they are printed as they are
    assert format_squeue([_job()], now=NOW, fmt="%-5j %%|%i", noheader=True, errors=errors) == "%-5j %|12\n"
    assert errors == ["Invalid job format specification: -", "Invalid job format specification: |"]
    assert format_squeue([_job()], now=NOW, fmt="%i%%j", noheader=True) == "12train\n"
    assert parse_format("no fields", []) == [("", 0, False, "no fields")]


def test_format_long_widths_and_default_width() -> None:
    out = format_squeue([_job()], now=NOW, fmt_long="JobID:.6,Name:4,State", noheader=True)
    assert out == "    12traiRUNNING             \n"


def test_array_rows_collapsed_and_expanded() -> None:
    waiting = _job(id=12, ref="12_[2-4%2]", array="0-4%2", state="PENDING", reason="JobArrayTaskLimit",
                   node=None, start_time=None)
    running = _job(id=15, ref="12_0", array_job_id=12, array_task_id=0)
    collapsed = format_squeue([waiting, running], now=NOW, fmt="%i %A %F %K %t", noheader=True).splitlines()
    assert collapsed == ["12_[2-4%2] 12 12 2-4%2 PD", "12_0 15 12 0 R"]
    expanded = format_squeue([waiting, running], now=NOW, fmt="%i %K", noheader=True, array=True).splitlines()
    assert expanded == ["12_2 2", "12_3 3", "12_4 4", "12_0 0"]


def test_gres_cpus_memory() -> None:
    job = _job(gpus=2, cpus=8, mem_mb=1536)
    assert format_squeue([job], now=NOW, fmt="%b %C %m", noheader=True) == "gres:gpu:2 8 1.50G\n"
    assert format_squeue([_job(gpus=1, gpu_type="a100")], now=NOW, fmt="%b", noheader=True) == "gres:gpu:a100:1\n"
    assert format_squeue([_job()], now=NOW, fmt="%b", noheader=True) == "N/A\n"
    assert [mem_size(mb) for mb in (0, 1000, 1024, 2048, 1536, 1048576)] == ["0", "1000M", "1G", "2G", "1.50G", "1T"]


def test_start_end_and_time_left() -> None:
    unlimited = _job(time_limit_s=None)
    assert format_squeue([unlimited], now=NOW, fmt="%S %e %l %L", noheader=True) == (
        "2026-11-24T10:00:05 NONE UNLIMITED UNLIMITED\n")
    assert format_squeue([_job()], now=NOW, fmt="%e %L", noheader=True) == "2026-11-24T11:00:05 57:55\n"
    over = _job(time_limit_s=60)
    assert format_squeue([over], now=NOW, fmt="%L", noheader=True) == "INVALID\n"
    pending = _job(state="PENDING", reason="Priority", node=None, start_time=None)
    assert format_squeue([pending], now=NOW, fmt="%S %e %M", noheader=True) == "N/A N/A 0:00\n"


def test_ended_jobs_give_slurms_reasons() -> None:
    ended = [_job(id=n, ref=str(n), state=state, end_time="2026-11-24T10:01:00.000+00:00")
             for n, state in enumerate(["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "COMPLETED", "CANCELLED"], 30)]
    rows = format_squeue(ended, now=NOW, fmt="%i %t %R %r %M", noheader=True, sort="i").splitlines()
    assert rows == ["30 F (NonZeroExitCode) NonZeroExitCode 0:55", "31 TO (TimeLimit) TimeLimit 0:55",
                    "32 OOM (OutOfMemory) OutOfMemory 0:55", "33 CD box None 0:55", "34 CA box None 0:55"]


def test_dependency_shows_what_is_still_awaited() -> None:
    job = _job(state="PENDING", reason="Dependency", dependency="afterok:3:4,afterany:5", node=None, start_time=None)
    assert format_squeue([job], now=NOW, fmt="%E", noheader=True) == (
        "afterok:3(unfulfilled),afterok:4(unfulfilled),afterany:5(unfulfilled)\n")
    assert format_squeue([_job(dependency="afterok:3")], now=NOW, fmt="%E", noheader=True) == "(null)\n"


def test_default_sort_pending_by_priority_then_running() -> None:
    jobs = [_job(id=1, ref="1"),
            _job(id=2, ref="2", state="PENDING", reason="Priority", priority=5, node=None, start_time=None),
            _job(id=3, ref="3", state="PENDING", reason="Resources", priority=9, node=None, start_time=None)]
    assert format_squeue(jobs, now=NOW, fmt="%i", noheader=True) == "3\n2\n1\n"
    assert format_squeue(jobs, now=NOW, fmt="%i", noheader=True, sort="-i") == "3\n2\n1\n"
    assert format_squeue(jobs, now=NOW, fmt="%i", noheader=True, sort="-t,i") == "1\n2\n3\n"


def test_without_priorities_the_queue_order_stands_for_them() -> None:
    def waiting(n: int, **fields: object) -> dict[str, object]:
        return _job(**{"id": n, "ref": str(n), "state": "PENDING", "reason": "Priority", "node": None,
                       "start_time": None, **fields})
    jobs = [waiting(4), waiting(5, held=True, reason="JobHeldUser"), waiting(6), _job(id=3, ref="3")]
    assert format_squeue(jobs, now=NOW, fmt="%i", noheader=True) == "4\n6\n5\n3\n"


def test_unknown_sort_key_is_an_error() -> None:
    with pytest.raises(ValueError, match="Invalid sort specification: %"):
        format_squeue([_job()], now=NOW, sort="%")


def test_start_lists_pending_jobs_by_expected_start() -> None:
    later = _job(id=2, ref="2", state="PENDING", reason="Priority", node=None, start_time=None,
                 estimated_start="2026-11-24T12:00:00.000+00:00")
    sooner = _job(id=3, ref="3", state="PENDING", reason="Resources", node=None, start_time=None,
                  estimated_start="2026-11-24T11:00:00.000+00:00")
    lines = format_squeue([_job(), later, sooner], now=NOW, start=True, node_name="box").splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES",
                                "NODELIST(REASON)"]
    assert [line.split()[0] for line in lines[1:]] == ["3", "2"]
    assert lines[1].split()[5:8] == ["2026-11-24T11:00:00", "1", "box"]


def test_import_stays_cheap() -> None:
    """squeue runs on every poll of a workflow tool: none of the costly standard modules on its path."""
    code = ("import sys, corral.cli.slurm; before = set(sys.modules); import corral.cli.slurm.squeue_format; "
            "print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # durations come from corral.core.units.units (its package's __init__ imports nothing), which itself imports
    # math and corral.errors alone
    assert out.strip() == ("['corral.cli.slurm.squeue_fields', 'corral.cli.slurm.squeue_format', 'corral.cli.slurm.values', "
                           "'corral.core', 'corral.core.units', 'corral.core.units.units', 'corral.errors', 'math']")


# sbatch -H --comment="hello world" --begin=2026-11-26T10:00 --deadline=2026-11-28T12:00 --exclusive --nodelist=vm
# --time=30 --time-min=10 (job 2), and a running one with --constraint=gpu --priority=100 (job 7), on the testbed
FIELD_JOBS = [
 {"id": 2, "ref": "2", "array_job_id": None, "array_task_id": None, "array": None, "name": "fields", "user": "root",
  "state": "PENDING", "reason": "JobHeldUser", "held": True, "gpus": 0, "nodes": 1, "gpu_type": None, "cpus": 1, "mem_mb": 1024,
  "time_limit_s": 1800, "time_min_s": 600, "nice": 0, "partition": "debug", "account": "root", "qos": "normal", "dependency": None,
  "node": None, "workdir": "/tmp/sf", "command": ["/tmp/sf/job.sh"], "submit_time": "2026-11-25T01:53:00Z", "start_time": None,
  "estimated_start": None, "end_time": None, "comment": "hello world", "begin_time": "2026-11-26T10:00:00Z",
  "deadline": "2026-11-28T12:00:00Z", "exclusive": True, "features": None, "nodelist": ["vm"], "exclude": [],
  "fixed_priority": None},
 {"id": 7, "ref": "7", "array_job_id": None, "array_task_id": None, "array": None, "name": "runner", "user": "root",
  "state": "RUNNING", "reason": None, "held": False, "gpus": 0, "nodes": 1, "gpu_type": None, "cpus": 1, "mem_mb": 1024,
  "time_limit_s": 1800, "time_min_s": 600, "nice": 0, "partition": "debug", "account": "root", "qos": "normal", "dependency": None,
  "node": "vm", "workdir": "/tmp/sf", "command": ["/tmp/sf/job.sh"], "submit_time": "2026-11-25T01:53:14Z",
  "start_time": "2026-11-25T01:53:14Z", "estimated_start": None, "end_time": None, "comment": "run note", "begin_time": None,
  "deadline": "2026-11-28T12:00:00Z", "exclusive": True, "features": "gpu", "nodelist": ["vm"], "exclude": [],
  "fixed_priority": 100},
]


def _fields_golden(name: str) -> tuple[str, float]:
    path = Path(__file__).parent / "golden" / name
    return path.read_text(), float(Path(f"{path}.now").read_text())


def test_sbatch_fields_codes_match_slurm() -> None:
    want, now = _fields_golden("squeue_fields_codes.txt")
    # a pending job starts (and ends) from its --begin; a running one ends at start + limit; %Q an admin's --priority
    assert format_squeue(FIELD_JOBS, now=now, fmt="%i|%S|%e|%V|%f|%n|%k|%Q|%p|%x|%l|%L") == want


def test_sbatch_fields_long_names_match_slurm() -> None:
    want, now = _fields_golden("squeue_fields_O.txt")
    errors: list[str] = []
    ours = format_squeue(FIELD_JOBS, now=now, errors=errors, fmt_long=(
        "JobID:6,Comment:15,Feature:12,ReqNodes:8,ExcNodes:8,StartTime:22,EndTime:22,SubmitTime:22,Priority:12,"
        "PriorityLong:12,OverSubscribe:6,MinTime:10,Deadline:22,EligibleTime:22"))
    assert [f"squeue: error: {e}" for e in errors] + ours.splitlines() == want.splitlines()
