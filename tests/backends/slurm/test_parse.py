"""squeue's, sacct's and sbatch's text read into corral's types, from outputs as Slurm prints them."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator

import pytest

from corral.backends.slurm.cluster import node_from_sinfo
from corral.backends.slurm.parse import (
    SACCT_ARGS,
    SACCT_FIELDS,
    SEP,
    SLURM_ENV,
    SQUEUE_ARGS,
    SQUEUE_ENDED_ARGS,
    SQUEUE_ENDED_FIELDS,
    SQUEUE_FIELDS,
    SQUEUE_FORMAT,
    map_state,
    outcome_from_sacct,
    parse_exit_code,
    parse_reason,
    parse_sacct,
    parse_sbatch_id,
    parse_slurm_duration,
    parse_slurm_time,
    parse_squeue,
    parse_squeue_ended,
)
from corral.core.jobspec.job import Outcome
from corral.core.jobspec.states import JobState


@pytest.fixture(autouse=True)
def berlin_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Slurm prints local times; pin the zone (CET in winter, CEST in summer) so times are exact."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.timezone.utc).timestamp()


def slurm_output(text: str) -> str:
    """Test outputs are written with `|` for legibility; Slurm is asked to print SEP instead."""
    return text.replace("|", SEP)


# squeue -h -a -o SQUEUE_FORMAT, with SLURM_TIME_FORMAT=standard
SQUEUE_OUTPUT = slurm_output("""\
123_[4-9%2]|123|123|4-9%2|PENDING|JobArrayTaskLimit||N/A|0:00
123_3|130|123|3|RUNNING|None|gpu01|2026-11-21T08:30:00|1:02:03
123_2|129|123|2|COMPLETING|None|gpu02|2026-11-21T08:00:00|1-02:03:04
200|200|200|N/A|PENDING|Resources||2026-11-22T10:00:00|0:00
201|201|201|N/A|PENDING|(Priority)||N/A|0:00
202|202|202|N/A|PENDING|Dependency||N/A|0:00
203|203|203|N/A|RUNNING|None|gpu03|2026-07-01T12:00:00|5:07
204|204|204|N/A|PENDING|ReqNodeNotAvail, UnavailableNodes:gpu[04-05]||N/A|0:00
205|205|205|N/A|SUSPENDED|None|gpu06|2026-11-21T08:00:00|10:00
206|206|206|N/A|REQUEUE_HOLD|JobHeldUser||N/A|0:00
207|207|207|N/A|PREEMPTED|None|gpu01|2026-11-21T08:00:00|INVALID
""")

# sacct --parsable2 --noheader --delimiter=SEP --format=JobID,JobIDRaw,State,ExitCode,Start,End,Elapsed,NodeList
SACCT_OUTPUT = slurm_output("""\
123_[5-9%2]|123|PENDING|0:0|None|Unknown|00:00:00|None assigned
123_4|127|RUNNING|0:0|2026-11-21T08:30:00|Unknown|00:10:00|gpu01
123_4.batch|127.batch|RUNNING|0:0|2026-11-21T08:30:00|Unknown|00:10:00|gpu01
123_4.extern|127.extern|RUNNING|0:0|2026-11-21T08:30:00|Unknown|00:10:00|gpu01
123_1|124|COMPLETED|0:0|2026-11-21T07:00:00|2026-11-21T08:00:00|01:00:00|gpu02
123_1.batch|124.batch|COMPLETED|0:0|2026-11-21T07:00:00|2026-11-21T08:00:00|01:00:00|gpu02
300|300|FAILED|2:0|2026-11-21T09:00:00|2026-11-21T09:00:05|00:00:05|gpu01
300.batch|300.batch|FAILED|2:0|2026-11-21T09:00:00|2026-11-21T09:00:05|00:00:05|gpu01
300.extern|300.extern|COMPLETED|0:0|2026-11-21T09:00:00|2026-11-21T09:00:05|00:00:05|gpu01
301|301|CANCELLED by 0|0:15|2026-11-21T09:00:00|2026-11-21T09:30:00|00:30:00|gpu01
301.batch|301.batch|CANCELLED|0:15|2026-11-21T09:00:00|2026-11-21T09:30:00|00:30:00|gpu01
302|302|TIMEOUT|0:0|2026-11-20T09:00:00|2026-11-21T09:00:10|1-00:00:10|gpu04
302.batch|302.batch|CANCELLED|0:15|2026-11-20T09:00:00|2026-11-21T09:00:12|1-00:00:12|gpu04
303|303|OUT_OF_MEMORY|0:125|2026-11-21T09:00:00|2026-11-21T09:01:00|00:01:00|gpu05
303.batch|303.batch|OUT_OF_MEMORY|0:125|2026-11-21T09:00:00|2026-11-21T09:01:00|00:01:00|gpu05
304|304|NODE_FAIL|1:0|2026-11-21T09:00:00|2026-11-21T09:05:00|00:05:00|gpu06
305|305|PREEMPTED|0:15|2026-11-21T09:00:00|2026-11-21T09:20:00|00:20:00|gpu07
306|306|REQUEUED|0:0|2026-11-21T09:00:00|2026-11-21T09:20:00|00:20:00|gpu07
307|307|BOOT_FAIL|0:0|2026-11-21T09:00:00|2026-11-21T09:00:00|00:00:00|gpu08
308|308|DEADLINE|0:0|None|2026-11-21T09:00:00|00:00:00|None assigned
309|309|CANCELLED by 1000|0:0|None|2026-11-21T10:00:00|00:00:00|None assigned
310|310|COMPLETED|0:0|2026-11-21T09:00:00|2026-11-21T09:00:01|00:00:01|gpu01
310.0|310.0|COMPLETED|0:0|2026-11-21T09:00:00|2026-11-21T09:00:01|00:00:01|gpu01
""")


def by_id(rows):
    return {row.job_id: row for row in rows}


# --- formats -------------------------------------------------------------------------------------------


def test_formats_separate_fields_with_an_unprintable_character_and_never_pad():
    assert SEP == "\x1f"
    assert SQUEUE_FORMAT.split(SEP) == list(SQUEUE_FIELDS)
    assert all(field[1:].isalpha() for field in SQUEUE_FIELDS)  # `%i`, not `%.18i`: no width, no padding
    assert f"--format={SQUEUE_FORMAT}" in SQUEUE_ARGS and "--noheader" in SQUEUE_ARGS
    assert {"--parsable2", "--noheader", f"--delimiter={SEP}"} <= set(SACCT_ARGS)
    assert f"--format={','.join(SACCT_FIELDS)}" in SACCT_ARGS
    assert SLURM_ENV == {"SLURM_TIME_FORMAT": "standard", "SLURM_BITSTR_LEN": "0"}


# --- squeue --------------------------------------------------------------------------------------------


def test_squeue_keeps_a_pending_array_range_as_one_row_with_its_task_ids():
    row = by_id(parse_squeue(SQUEUE_OUTPUT))["123_[4-9%2]"]
    assert row.is_range
    assert (row.raw_id, row.array_job_id, row.array_task_ids) == (123, 123, (4, 5, 6, 7, 8, 9))
    assert row.state is JobState.PENDING
    assert row.reason == "JobArrayTaskLimit"
    assert row.node is None and row.start_time is None and row.time_used_s == 0


def test_squeue_reads_a_running_array_task():
    row = by_id(parse_squeue(SQUEUE_OUTPUT))["123_3"]
    assert not row.is_range
    assert (row.raw_id, row.array_job_id, row.array_task_ids) == (130, 123, (3,))
    assert row.state is JobState.RUNNING and row.slurm_state == "RUNNING"
    assert row.reason is None
    assert row.node == "gpu01"
    assert row.start_time == utc(2026, 11, 21, 7, 30)
    assert row.time_used_s == 3723


def test_squeue_reads_plain_jobs_reasons_and_expected_starts():
    rows = by_id(parse_squeue(SQUEUE_OUTPUT))
    assert len(rows) == 11
    assert (rows["200"].array_job_id, rows["200"].array_task_ids) == (None, ())
    assert rows["200"].reason == "Resources"
    assert rows["200"].start_time == utc(2026, 11, 22, 9, 0)  # expected start
    assert rows["201"].reason == "Priority"  # the `(Reason)` spelling of %R
    assert rows["202"].reason == "Dependency"
    assert rows["204"].reason == "ReqNodeNotAvail, UnavailableNodes:gpu[04-05]"
    assert rows["203"].start_time == utc(2026, 7, 1, 10, 0)  # summer time
    assert rows["123_2"].time_used_s == 93784


def test_squeue_states_map_to_corral_states():
    rows = by_id(parse_squeue(SQUEUE_OUTPUT))
    assert rows["123_2"].state is JobState.RUNNING  # COMPLETING: not ended yet
    assert rows["205"].state is JobState.RUNNING  # SUSPENDED keeps its allocation
    assert rows["206"].state is JobState.PENDING  # REQUEUE_HOLD
    assert rows["207"].state is JobState.PREEMPTED and rows["207"].time_used_s is None
    assert by_id(parse_squeue(SQUEUE_OUTPUT, requeue=False))["207"].state is JobState.FAILED


def test_squeue_skips_and_logs_a_line_it_cannot_read(caplog):
    text = slurm_output(
        "bad line\n"
        "300|300|300|N/A|RUNNING|None|gpu01|2026-11-21T08:30:00|0:05\n"
        "x|y|z|N/A|RUNNING|None||N/A|0:00\n"
    )
    with caplog.at_level(logging.WARNING, logger="corral.slurm"):
        rows = parse_squeue(text)
    assert [row.job_id for row in rows] == ["300"]
    assert len(caplog.records) == 2


def test_squeue_of_nothing_is_no_rows():
    assert parse_squeue("") == []
    assert parse_squeue("\n\n") == []


# --- sacct ---------------------------------------------------------------------------------------------


def test_sacct_skips_step_rows():
    ids = [row.job_id for row in parse_sacct(SACCT_OUTPUT)]
    assert ids == ["123_[5-9%2]", "123_4", "123_1", "300", "301", "302", "303", "304", "305", "306", "307",
                   "308", "309", "310"]


def test_sacct_reads_array_ids_and_ranges():
    rows = by_id(parse_sacct(SACCT_OUTPUT))
    assert (rows["123_[5-9%2]"].raw_id, rows["123_[5-9%2]"].array_job_id) == (123, 123)
    assert rows["123_[5-9%2]"].array_task_ids == (5, 6, 7, 8, 9)
    assert rows["123_[5-9%2]"].node is None and rows["123_[5-9%2]"].start_time is None
    assert (rows["123_4"].raw_id, rows["123_4"].array_job_id, rows["123_4"].array_task_ids) == (127, 123, (4,))
    assert rows["123_4"].end_time is None
    assert (rows["300"].array_job_id, rows["300"].array_task_ids) == (None, ())


def test_sacct_reads_states_exit_codes_and_times():
    rows = by_id(parse_sacct(SACCT_OUTPUT))
    assert rows["123_1"].state is JobState.COMPLETED
    assert (rows["300"].state, rows["300"].exit_code, rows["300"].signal) == (JobState.FAILED, 2, None)
    assert (rows["301"].state, rows["301"].slurm_state) == (JobState.CANCELLED, "CANCELLED by 0")
    assert (rows["301"].exit_code, rows["301"].signal) == (143, 15)
    assert rows["302"].state is JobState.TIMEOUT and rows["302"].elapsed_s == 86410
    assert rows["303"].state is JobState.OUT_OF_MEMORY
    assert rows["304"].state is JobState.NODE_FAIL
    assert rows["305"].state is JobState.PREEMPTED
    assert rows["306"].state is JobState.PENDING
    assert rows["307"].state is JobState.NODE_FAIL
    assert rows["308"].state is JobState.TIMEOUT
    assert rows["309"].state is JobState.CANCELLED and rows["309"].start_time is None
    assert rows["300"].start_time == utc(2026, 11, 21, 8, 0)
    assert rows["300"].end_time == utc(2026, 11, 21, 8, 0, 5)


def test_sacct_skips_and_logs_a_line_it_cannot_read(caplog):
    text = slurm_output("1|1|COMPLETED|zero|None|None|00:00:00|None assigned\n2|2|COMPLETED\n")
    with caplog.at_level(logging.WARNING, logger="corral.slurm"):
        assert parse_sacct(text) == []
    assert len(caplog.records) == 2


# squeue -h -a -t all -O SQUEUE_ENDED_FIELDS, as the testbed printed it: what a cluster without accounting keeps
SQUEUE_ENDED_OUTPUT = slurm_output("""\
6|6|N/A|CANCELLED|15|2026-12-02T22:46:01|2026-12-02T22:46:03|0:02|vm
3|3|3|FAILED|512|2026-12-02T22:45:46|2026-12-02T22:45:47|0:01|vm
5|3|2|FAILED|512|2026-12-02T22:45:44|2026-12-02T22:45:45|0:01|vm
7|7|N/A|FAILED|9|2026-12-02T22:46:01|2026-12-02T22:46:01|0:00|vm
8|8|2-5%1|PENDING|0|N/A|N/A|0:00|
9|8|1|RUNNING|0|2026-12-02T22:46:37|NONE|0:01|vm
10|10|N/A|COMPLETED|0|2026-12-02T22:47:00|2026-12-02T22:47:01|0:01|vm
""")


def test_squeue_of_every_state_reads_as_accountings_records_of_the_jobs_asked_for():
    rows = by_id(parse_squeue_ended(SQUEUE_ENDED_OUTPUT, ["6", "3", "7", "8"]))
    assert sorted(rows) == ["3_2", "3_3", "6", "7", "8_1", "8_[2-5%1]"]  # an array's id names its tasks; 10 not asked
    assert (rows["6"].state, rows["6"].exit_code, rows["6"].signal) == (JobState.CANCELLED, 143, 15)
    assert (rows["3_2"].state, rows["3_2"].exit_code, rows["3_2"].raw_id) == (JobState.FAILED, 2, 5)
    assert (rows["3_2"].array_job_id, rows["3_2"].array_task_ids) == (3, (2,))
    assert (rows["7"].exit_code, rows["7"].signal) == (137, 9)
    assert rows["8_[2-5%1]"].array_task_ids == (2, 3, 4, 5) and rows["8_[2-5%1]"].state is JobState.PENDING
    assert rows["8_1"].end_time is None and rows["8_1"].state is JobState.RUNNING
    assert rows["3_2"].end_time == dt.datetime(2026, 12, 2, 22, 45, 45).timestamp() and rows["3_2"].elapsed_s == 1
    assert outcome_from_sacct(rows["3_2"]) == Outcome("FAILED", 2, None, rows["3_2"].end_time, None)


def test_squeue_of_every_state_asks_for_no_text_a_jobs_owner_wrote():
    # a job's name can hold `JobState=COMPLETED ExitCode=0:0`; its owner must not decide how it reads as ended
    assert "--states=all" in SQUEUE_ENDED_ARGS
    assert not {"Name", "Comment", "WorkDir", "Command", "Reason"} & set(SQUEUE_ENDED_FIELDS)
    assert parse_squeue_ended(slurm_output("11|11|N/A|FAILED|zero|N/A|N/A|0:00|\n"), ["11"]) == []


# --- outcomes ------------------------------------------------------------------------------------------


def test_outcome_of_a_failed_job_is_its_exit_code_and_end_time():
    row = by_id(parse_sacct(SACCT_OUTPUT))["300"]
    assert outcome_from_sacct(row) == Outcome("FAILED", 2, None, utc(2026, 11, 21, 8, 0, 5), None)


def test_outcome_keeps_what_the_state_name_loses():
    rows = by_id(parse_sacct(SACCT_OUTPUT))
    cancelled = outcome_from_sacct(rows["301"])
    assert (cancelled.state, cancelled.exit_code, cancelled.signal) == ("CANCELLED", 143, 15)
    assert cancelled.error == "Slurm: CANCELLED by 0"
    assert outcome_from_sacct(rows["307"]).error == "Slurm: BOOT_FAIL"
    assert outcome_from_sacct(rows["303"]) == Outcome("OUT_OF_MEMORY", None, None, utc(2026, 11, 21, 8, 1), None)
    assert outcome_from_sacct(rows["123_1"]).error is None


def test_a_preempted_job_ends_only_when_it_was_not_requeued():
    with pytest.raises(ValueError):
        outcome_from_sacct(by_id(parse_sacct(SACCT_OUTPUT))["305"])
    outcome = outcome_from_sacct(by_id(parse_sacct(SACCT_OUTPUT, requeue=False))["305"])
    assert (outcome.state, outcome.error) == ("FAILED", "Slurm: PREEMPTED")


def test_no_outcome_for_a_job_still_running_and_now_stands_in_for_a_missing_end():
    rows = by_id(parse_sacct(SACCT_OUTPUT))
    with pytest.raises(ValueError, match="not ended"):
        outcome_from_sacct(rows["123_4"])
    ended_without_end = rows["300"]._replace(end_time=None)
    with pytest.raises(ValueError, match="no end time"):
        outcome_from_sacct(ended_without_end)
    assert outcome_from_sacct(ended_without_end, now=1234.5).end_time == 1234.5


# --- pieces --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("slurm", "corral"), [
    ("PENDING", JobState.PENDING), ("REQUEUED", JobState.PENDING), ("REQUEUE_HOLD", JobState.PENDING),
    ("REQUEUE_FED", JobState.PENDING), ("RESV_DEL_HOLD", JobState.PENDING), ("SPECIAL_EXIT", JobState.PENDING),
    ("RUNNING", JobState.RUNNING), ("CONFIGURING", JobState.RUNNING), ("COMPLETING", JobState.RUNNING),
    ("SUSPENDED", JobState.RUNNING), ("STOPPED", JobState.RUNNING), ("STAGE_OUT", JobState.RUNNING),
    ("COMPLETED", JobState.COMPLETED), ("FAILED", JobState.FAILED), ("CANCELLED", JobState.CANCELLED),
    ("CANCELLED by 4242", JobState.CANCELLED), ("CANCELLED+", JobState.CANCELLED),
    ("TIMEOUT", JobState.TIMEOUT), ("DEADLINE", JobState.TIMEOUT), ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
    ("NODE_FAIL", JobState.NODE_FAIL), ("BOOT_FAIL", JobState.NODE_FAIL), ("PREEMPTED", JobState.PREEMPTED),
])
def test_map_state(slurm, corral):
    assert map_state(slurm) is corral


def test_an_unknown_state_is_logged_and_kept_active_so_the_job_is_still_watched(caplog):
    with caplog.at_level(logging.WARNING, logger="corral.slurm"):
        state = map_state("POWER_UP_NODE")
    assert state is JobState.RUNNING and not state.is_terminal()
    assert "POWER_UP_NODE" in caplog.text


@pytest.mark.parametrize(("text", "expected"), [
    ("0:0", (0, None)), ("2:0", (2, None)), ("0:15", (143, 15)), ("0:9", (137, 9)), ("1:0", (1, None)),
    ("0:125", (None, None)), ("255:0", (255, None)),
])
def test_parse_exit_code(text, expected):
    assert parse_exit_code(text) == expected


def test_parse_exit_code_refuses_text():
    with pytest.raises(ValueError):
        parse_exit_code("0-15")


def test_parse_slurm_time_reads_local_time_and_slurms_words_for_none():
    assert parse_slurm_time("2026-11-21T08:30:00") == utc(2026, 11, 21, 7, 30)
    assert parse_slurm_time("2026-07-01T08:30:00") == utc(2026, 7, 1, 6, 30)
    for none in ("Unknown", "None", "N/A", "", " "):
        assert parse_slurm_time(none) is None
    with pytest.raises(ValueError):
        parse_slurm_time("Sat 21 Nov")


@pytest.mark.parametrize(("text", "seconds"), [
    ("0:00", 0), ("5:07", 307), ("1:02:03", 3723), ("00:10:00", 600), ("1-02:03:04", 93784),
    ("2-00", 172800), ("3-01:30", 264600), ("90", 5400), ("INVALID", None), ("UNLIMITED", None),
])
def test_parse_slurm_duration(text, seconds):
    assert parse_slurm_duration(text) == seconds


def test_parse_slurm_duration_refuses_text():
    for text in ("1:2:3:4", "a:00", "x-01:00:00"):
        with pytest.raises(ValueError):
            parse_slurm_duration(text)


def test_parse_reason():
    assert parse_reason("(Resources)") == "Resources"
    assert parse_reason("Resources") == "Resources"
    assert parse_reason("None") is None
    assert parse_reason("(None)") is None
    assert parse_reason("(null)") is None


def test_parse_sbatch_id():
    assert parse_sbatch_id("12345\n") == 12345
    assert parse_sbatch_id("12345;cluster-a\n") == 12345
    for text in ("", "sbatch: error: Batch job submission failed: Invalid account\n"):
        with pytest.raises(ValueError):
            parse_sbatch_id(text)


@pytest.mark.parametrize("gres, gpus", [
    ("(null)", []),
    ("gpu:4", ["gpu"] * 4),
    ("gpu:a100:8(S:0-1)", ["a100"] * 8),
    # a node with a GPU whole and one cut into MIG slices, and shards: every type, no shard
    ("gpu:a100:1(S:0),gpu:3g.40gb:1(S:0),gpu:1g.10gb:2(S:0),shard:8", ["a100", "3g.40gb", "1g.10gb", "1g.10gb"]),
    ("gpu:t4:2,gpu:a100:2", ["t4", "t4", "a100", "a100"]),
])
def test_sinfo_lines_give_every_gpu_of_every_type(gres, gpus):
    node = node_from_sinfo("gpu01", "64", "515000", gres)
    assert (node.name, node.cpus, node.mem_mb) == ("gpu01", 64, 515000)
    assert [(g.index, g.type) for g in node.gpus] == list(enumerate(gpus))
