"""GPUs in use outside corral in the pure policy and their bookkeeping: an avoided GPU is never given to a job,
a job only such GPUs could run waits with ReqNodeNotAvail naming the GPU, the pid and the user; `ignore` leaves
them placeable; a process keeps the time it was first seen and is dropped when a sample no longer shows it."""

from __future__ import annotations

import pytest

from corral.core.monitoring.outside_use import (
    OutsideProcess, avoided_by_node, carry_since, check_mode, note, shared_by_node, unavailable,
)
from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.resources import Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason
from corral.errors import InvalidRequest

NOW = 1000.0
NODE = Node("gpu01", cpus=32, mem_mb=256 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(2)))
NOTEBOOK = OutsideProcess(gpu=1, pid=4242, user="alice", mem_mb=2048.0, since=900.0)


def job(job_id: int, **request) -> PendingJob:
    return PendingJob(job_id, Request(**request), time_limit_s=3600)


def test_an_avoided_gpu_is_never_given_and_a_job_only_it_could_run_waits_with_req_node_not_avail():
    off = unavailable({}, avoided_by_node({"gpu01": [NOTEBOOK]}, {"gpu01": "avoid"}))
    assert off == {"gpu01": frozenset({1})}
    decisions = schedule([NODE], [], [job(1, gpus=2), job(2, gpus=1), job(3, gpus=1)], NOW, drained=off)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(2, (0,))]
    assert decisions.reasons == {1: PendingReason.NODE_NOT_AVAIL, 3: PendingReason.RESOURCES}
    assert note({"gpu01": [NOTEBOOK]}, {"gpu01": "avoid"}) == "gpu01 GPU 1 in use outside corral by alice (pid 4242, 2048 MB)"


def test_ignore_places_jobs_as_if_the_outside_process_were_not_there():
    modes = {"gpu01": "ignore"}
    off = unavailable({}, avoided_by_node({"gpu01": [NOTEBOOK]}, modes))
    assert off == {}
    decisions = schedule([NODE], [], [job(1, gpus=2)], NOW, drained=off)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (0, 1))]
    assert note({"gpu01": [NOTEBOOK]}, modes) == ""


def test_drained_and_avoided_gpus_add_up():
    assert unavailable({"gpu01": frozenset({0}), "gpu02": frozenset({3})},
                       {"gpu01": frozenset({1})}) == {"gpu01": frozenset({0, 1}), "gpu02": frozenset({3})}


def test_a_process_keeps_when_it_was_first_seen_and_is_gone_once_a_sample_no_longer_shows_it():
    first = carry_since((), [NOTEBOOK])
    again = carry_since(first, [OutsideProcess(gpu=1, pid=4242, user="alice", mem_mb=4096.0, since=1000.0)])
    assert [(p.pid, p.mem_mb, p.since) for p in again] == [(4242, 4096.0, 900.0)]
    assert again[0].to_dict() == {"pid": 4242, "user": "alice", "mem_mb": 4096, "since": "1970-01-01T00:15:00Z"}
    assert carry_since(again, []) == ()
    reused = carry_since(again, [OutsideProcess(gpu=1, pid=4242, user="bob", mem_mb=None, since=1010.0)])
    assert reused[0].since == 1010.0 and reused[0].describe() == "bob (pid 4242)"  # another user's: a new process


def test_the_setting_takes_avoid_ignore_or_share_and_names_itself_otherwise():
    assert check_mode("avoid") == "avoid" and check_mode("ignore") == "ignore" and check_mode("share") == "share"
    with pytest.raises(InvalidRequest) as other:
        check_mode("never")
    assert other.value.field == "node.outside_processes"


def test_share_mode_counts_the_outside_processes_memory_as_used_and_all_of_it_where_nvml_cannot_say():
    seen = {"gpu01": [OutsideProcess(gpu=0, pid=1, user="alice", mem_mb=2048.4, since=0.0),
                      OutsideProcess(gpu=0, pid=2, user="alice", mem_mb=1024.0, since=0.0),
                      OutsideProcess(gpu=1, pid=3, user="bob", mem_mb=None, since=0.0)]}
    memory = {"gpu01": {0: 81920, 1: 81920}}
    assert shared_by_node(seen, {"gpu01": "share"}, memory) == {"gpu01": {0: 3072, 1: 81920}}
    assert shared_by_node(seen, {"gpu01": "avoid"}, memory) == {}
    assert avoided_by_node(seen, {"gpu01": "share"}) == {}  # a sharing job may go there: the policy keeps whole jobs off
