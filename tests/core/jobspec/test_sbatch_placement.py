"""sbatch's --begin, --deadline, --exclusive, --constraint, --nodelist/--exclude, --cpus-per-gpu, --time-min and
--priority: read into the spec against an injected clock, and honoured by the pure scheduling policy."""

from __future__ import annotations

import time

import pytest

from corral.core.scheduling.admission import check_priority, check_runnable
from corral.core.jobspec.features import parse_constraint, satisfies
from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.policy import schedule
from corral.core.scheduling.priority import prioritize
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.jobspec.spec import build_spec
from corral.core.jobspec.spec_slurm import mail_types
from corral.core.jobspec.states import PendingReason
from corral.errors import Forbidden, InvalidRequest, Unsatisfiable

G = 1024
NOW = time.mktime((2026, 11, 24, 12, 0, 0, 0, 0, -1))  # noon, local time
GPUS = tuple(Gpu(i, "A100", 80 * G) for i in range(4))
NODE = Node("gpu01", cpus=32, mem_mb=256 * G, gpus=GPUS, features=("a100", "nvlink"))
OTHER = Node("gpu02", cpus=16, mem_mb=128 * G, gpus=tuple(Gpu(i, "H100", 80 * G) for i in range(2)), features=("h100",))


def spec(**fields):
    return build_spec(fields if "script" in fields else {"command": ["true"], **fields}, user="alice", log_dir="/tmp", default_workdir="/tmp",
                      server_env={}, now=NOW)


# -- reading the fields -------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("now+1hour", NOW + 3600),
    ("now+90", NOW + 90),  # seconds, as Slurm's bare count
    ("16:00", NOW + 4 * 3600),  # later today
    ("08:00", NOW + 20 * 3600),  # passed today: tomorrow's
    ("2026-12-01T08:00", time.mktime((2026, 12, 1, 8, 0, 0, 0, 0, -1))),
    ("tomorrow", time.mktime((2026, 11, 25, 0, 0, 0, 0, 0, -1))),
    (NOW + 5, NOW + 5),  # epoch seconds, from the REST API
])
def test_begin_reads_slurms_time_forms_against_the_servers_clock(text, expected):
    assert spec(begin=text).begin_time == expected


def test_a_bad_begin_names_the_field_and_the_forms():
    with pytest.raises(InvalidRequest) as err:
        spec(begin="soon")
    assert err.value.field == "begin" and "now+1hour" in str(err.value)


@pytest.mark.parametrize("fields, words", [
    ({"deadline": "now-1hour"}, "already past"),
    ({"deadline": "now+1hour", "begin": "now+2hours"}, "not after --begin"),
    ({"deadline": "now+1hour", "time": "2:00:00"}, "could not end in time"),
    ({"deadline": "now+1hour", "begin": "now+30minutes", "time": "45"}, "could not end in time"),
])
def test_a_deadline_that_cannot_be_met_is_refused_at_submit(fields, words):
    with pytest.raises(InvalidRequest) as err:
        spec(**fields)
    assert err.value.field == "deadline" and words in str(err.value)


def test_a_deadline_with_room_is_kept_and_time_min_is_what_must_fit():
    assert spec(deadline="now+1hour", time="30").deadline == NOW + 3600
    kept = spec(deadline="now+1hour", time="2:00:00", time_min="30")
    assert (kept.time_min_s, kept.time_limit_s) == (1800, 7200)


def test_cpus_per_gpu_multiplies_and_gpus_per_task_is_the_gpu_count():
    assert spec(gpus=2, cpus_per_gpu=8).cpus == 16
    assert spec(options=["--gpus-per-task=3", "--cpus-per-gpu=4"]).cpus == 12
    with pytest.raises(InvalidRequest, match="needs a GPU request"):
        spec(cpus_per_gpu=4)
    with pytest.raises(InvalidRequest, match="given together with cpus"):
        spec(gpus=1, cpus=2, cpus_per_gpu=4)
    # a later source's --cpus-per-task replaces a script's --cpus-per-gpu, as any respelling does
    assert spec(script="#!/bin/sh\n#SBATCH --gpus=2 --cpus-per-gpu=8\ntrue\n", options=["-c", "3"]).cpus == 3


def test_the_new_options_reach_the_spec_from_a_script_and_from_options():
    s = spec(script="#!/bin/sh\n#SBATCH --exclusive -C 'a100&nvlink' -w gpu01 -x gpu02\n#SBATCH --mail-type=END,FAIL\ntrue\n",
             options=["--mail-user=me@lab.org", "--priority=7"])
    assert (s.exclusive, s.features, s.nodelist, s.exclude) == (True, "a100&nvlink", ("gpu01",), ("gpu02",))
    assert (s.mail_type, s.mail_user, s.priority) == (("END", "FAIL"), "me@lab.org", 7)
    assert s.request.exclusive and s.request.features == "a100&nvlink"


def test_mail_types_spell_out_all_and_none_clears():
    assert mail_types("ALL") == ("BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND")
    assert mail_types("begin,TIME_LIMIT_90") == ("BEGIN", "TIME_LIMIT_90")
    assert mail_types("END,NONE") == ()
    with pytest.raises(InvalidRequest):
        mail_types("SOMETIMES")


def test_constraints_read_and_and_or_with_and_binding_tighter():
    assert parse_constraint(" a100 & nvlink ") == "a100&nvlink"
    assert satisfies("a100&nvlink", {"a100", "nvlink"}) and not satisfies("a100&nvlink", {"a100"})
    assert satisfies("h100|a100&nvlink", {"h100"}) and satisfies("h100|a100&nvlink", {"a100", "nvlink"})
    assert not satisfies("h100|a100&nvlink", {"a100"})
    with pytest.raises(InvalidRequest, match="one node"):
        parse_constraint("[a100|h100]")


def test_a_constraint_no_node_meets_is_refused_naming_the_features_there_are():
    with pytest.raises(Unsatisfiable) as err:
        check_runnable(spec(constraint="v100"), [NODE, OTHER])
    assert err.value.field == "constraint"
    assert "v100: on no node" in str(err.value) and "a100, h100, nvlink" in str(err.value)
    with pytest.raises(Unsatisfiable):  # each feature is somewhere, but on no one node together
        check_runnable(spec(constraint="h100&nvlink"), [NODE, OTHER])
    check_runnable(spec(constraint="h100|v100"), [NODE, OTHER])


def test_node_names_that_are_no_node_are_refused_with_the_list():
    with pytest.raises(Unsatisfiable) as err:
        check_runnable(spec(nodelist="vm"), [NODE, OTHER])
    assert err.value.field == "nodelist" and "gpu01, gpu02" in str(err.value)
    with pytest.raises(Unsatisfiable) as err:
        check_runnable(spec(exclude="gpu01,vm"), [NODE])
    assert err.value.field == "exclude"
    with pytest.raises(Unsatisfiable, match="leaves no node"):
        check_runnable(spec(exclude="gpu01"), [NODE])
    with pytest.raises(Unsatisfiable, match="runs on one"):
        check_runnable(spec(nodelist="gpu01,gpu02"), [NODE, OTHER])
    with pytest.raises(Unsatisfiable):  # gpu02 has 2 GPUs
        check_runnable(spec(nodelist="gpu02", gpus=4), [NODE, OTHER])


def test_only_an_admin_sets_a_priority_and_zero_holds():
    with pytest.raises(Forbidden):
        check_priority(spec(priority=10), privileged=False)
    check_priority(spec(priority=10), privileged=True)
    check_priority(spec(), privileged=False)
    assert spec(priority=0).hold


# -- the policy -----------------------------------------------------------------------------------


def pending(job_id: int, request: Request | None = None, **kw) -> PendingJob:
    return PendingJob(job_id, request or Request(gpus=1), **kw)


def test_a_job_waits_for_its_begin_time_and_blocks_nobody():
    queue = [pending(1, begin_time=NOW + 60), pending(2)]
    decisions = schedule([NODE], [], queue, now=NOW)
    assert [a.job_id for a in decisions.starts] == [2]
    assert decisions.reasons == {1: PendingReason.BEGIN_TIME}
    assert 1 not in decisions.estimates  # not yet eligible: no reservation for backfill to respect
    later = schedule([NODE], [], [queue[0]], now=NOW + 60)
    assert [a.job_id for a in later.starts] == [1]


def test_an_exclusive_job_takes_the_whole_node_and_nothing_goes_beside_it():
    exclusive = Request(gpus=1, exclusive=True)
    decisions = schedule([NODE], [], [pending(1, exclusive, time_limit_s=600), pending(2, time_limit_s=60)], now=NOW)
    assert decisions.starts == [Allocation(1, "gpu01", (0, 1, 2, 3), 32, 256 * G, end_time=NOW + 600)]
    assert decisions.reasons == {2: PendingReason.RESOURCES}


def test_an_exclusive_job_waits_for_an_empty_node_and_its_reservation_holds_it():
    running = [Allocation(9, "gpu01", (0,), 1, 0, end_time=NOW + 300)]
    queue = [pending(1, Request(gpus=1, exclusive=True), time_limit_s=600),
             pending(2, Request(gpus=1), time_limit_s=600), pending(3, Request(gpus=1), time_limit_s=200)]
    decisions = schedule([NODE], running, queue, now=NOW)
    assert decisions.estimates[1] == NOW + 300
    # job 2 would run into the exclusive job's reservation; job 3 ends before it and backfills
    assert [a.job_id for a in decisions.starts] == [3]


def test_nodelist_exclude_and_constraint_choose_the_node():
    nodes = [NODE, OTHER]
    for request, node in ((Request(gpus=1, nodelist=("gpu02",)), "gpu02"),
                          (Request(gpus=1, exclude=("gpu01",)), "gpu02"),
                          (Request(gpus=1, features="h100"), "gpu02"),
                          (Request(gpus=1, features="nvlink|h100"), "gpu01")):
        (start,) = schedule(nodes, [], [pending(1, request)], now=NOW).starts
        assert start.node == node, request
    busy = [Allocation(9, "gpu02", (0, 1), 1, 0)]
    decisions = schedule(nodes, busy, [pending(1, Request(gpus=1, features="h100"))], now=NOW)
    assert decisions.starts == [] and decisions.reasons == {1: PendingReason.RESOURCES}


def test_time_min_lets_backfill_start_it_with_the_longest_limit_that_fits():
    running = [Allocation(9, "gpu01", (0, 1, 2, 3), 1, 0, end_time=NOW + 600)]
    queue = [pending(1, Request(gpus=4), time_limit_s=600),  # reserved from NOW+600
             pending(2, Request(cpus=1), time_limit_s=7200, time_min_s=600)]
    decisions = schedule([NODE], running, queue, now=NOW)
    assert decisions.estimates == {1: NOW + 600}
    assert [a.job_id for a in decisions.starts] == [2]  # needs no GPU: nothing reserved stops it
    assert decisions.limits == {}
    gpu_queue = [pending(1, Request(gpus=4), time_limit_s=600, submit_time=0),
                 pending(2, Request(gpus=1), time_limit_s=7200, time_min_s=300)]
    free_now = [Allocation(9, "gpu01", (0, 1, 2), 1, 0, end_time=NOW + 1000)]
    decisions = schedule([NODE], free_now, gpu_queue, now=NOW)
    # job 1 is reserved from NOW+1000: job 2 gets the free GPU for the 1000 s up to it, in whole minutes
    assert [a.job_id for a in decisions.starts] == [2]
    assert decisions.limits == {2: 960}
    assert decisions.starts[0].end_time == NOW + 960
    short = schedule([NODE], free_now, [gpu_queue[0], pending(2, Request(gpus=1), time_limit_s=7200,
                                                              time_min_s=1200)], now=NOW)
    assert short.starts == [] and short.reasons[2] == PendingReason.PRIORITY


def test_a_pending_job_misses_its_deadline_once_its_limit_no_longer_fits():
    job = pending(1, time_limit_s=600, deadline=NOW + 900)
    assert not job.misses_deadline(NOW + 300) and job.misses_deadline(NOW + 301)
    flexible = pending(1, time_limit_s=600, time_min_s=60, deadline=NOW + 900)
    assert not flexible.misses_deadline(NOW + 840) and flexible.misses_deadline(NOW + 841)


def test_an_admins_priority_replaces_the_computed_one():
    queue = [pending(1, submit_time=NOW - 86400), pending(2, submit_time=NOW, priority=10**9)]
    ordered, factors = prioritize(queue, usage={}, config=SchedulerConfig(), now=NOW, total_gpus=4, total_cpus=32)
    assert [p.job_id for p in ordered] == [2, 1] and factors[2].priority == 10**9


def test_a_flexible_job_started_before_its_deadline_gets_the_time_left_until_it():
    job = pending(1, time_limit_s=7200, time_min_s=600, deadline=NOW + 1830)
    decisions = schedule([NODE], [], [job], now=NOW)
    assert decisions.limits == {1: 1800} and decisions.starts[0].end_time == NOW + 1800
    roomy = schedule([NODE], [], [pending(1, time_limit_s=600, time_min_s=60, deadline=NOW + 7200)], now=NOW)
    assert roomy.limits == {} and roomy.starts[0].end_time == NOW + 600
