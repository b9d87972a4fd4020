"""Reservations in the pure policy: their GPUs go to no other job inside their windows (backfill fits short
jobs around them), a job submitted into one runs there, only inside its window and only if it fits before
the end, and checking a new reservation refuses what cannot be kept."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.reservations import Reservation, Wanted, book, plan, wanted_update
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason
from corral.errors import Conflict, InvalidRequest, NotFound

NOW = 100_000.0
HOUR = 3600
NODE = Node("gpu01", cpus=32, mem_mb=256 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(4)))


def reservation(gpus=(0, 1), start=NOW, end=NOW + 4 * HOUR, name="demo") -> Reservation:
    return Reservation(name, "gpu01", tuple(gpus), 16, 128 * 1024, ("ada",), ("vision",), start, end, "root", NOW)


def job(job_id: int, gpus: int = 1, limit: int | None = HOUR, resv: str | None = None, user="bob") -> PendingJob:
    return PendingJob(job_id, Request(gpus=gpus, cpus=1, mem_mb=1024), user, time_limit_s=limit, reservation=resv)


def test_jobs_outside_never_get_reserved_gpus_inside_the_window_and_short_ones_fit_before_it():
    later = book([reservation(start=NOW + 2 * HOUR)], {})
    pending = [job(1, gpus=2, limit=3 * HOUR), job(2, gpus=2, limit=3 * HOUR), job(3, gpus=1, limit=HOUR),
               job(4, gpus=1, limit=HOUR)]
    decisions = schedule([NODE], [], pending, NOW, reservations=later)
    started = {a.job_id: a.gpu_ids for a in decisions.starts}
    # job 1 takes the two free GPUs; job 2 would run into the window: it waits for the reservation's end
    assert started[1] == (2, 3)
    assert decisions.estimates[2] == NOW + 3 * HOUR  # job 1's end, GPUs 2-3 again
    # one-hour jobs end before the window opens: backfilled onto the reserved GPUs now
    assert started[3] == (0,) and started[4] == (1,)


def test_a_job_in_the_reservation_runs_on_its_gpus_and_waits_with_reason_reservation_before_it_begins():
    now_on = book([reservation()], {})
    decisions = schedule([NODE], [], [job(1, gpus=2, resv="demo", user="ada")], NOW, reservations=now_on)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (0, 1))]
    later = book([reservation(start=NOW + HOUR)], {})
    waiting = schedule([NODE], [], [job(1, gpus=2, resv="demo", user="ada")], NOW, reservations=later)
    assert not waiting.starts and waiting.reasons[1] is PendingReason.RESERVATION
    assert waiting.estimates[1] == NOW + HOUR and waiting.reserved[1] == ("gpu01", (0, 1))  # squeue --start


def test_a_job_whose_limit_runs_past_the_end_does_not_start_and_blocks_nobody():
    now_on = book([reservation(end=NOW + HOUR)], {})
    pending = [job(1, gpus=1, limit=2 * HOUR, resv="demo"), job(2, gpus=1, limit=HOUR // 2, resv="demo"),
               job(3, gpus=2)]
    decisions = schedule([NODE], [], pending, NOW, reservations=now_on)
    assert decisions.reasons[1] is PendingReason.RESERVATION and 1 not in decisions.estimates
    assert {a.job_id: a.gpu_ids for a in decisions.starts} == {2: (0,), 3: (2, 3)}


def test_a_reservation_job_never_leaves_its_gpus_and_waits_for_its_own_running_jobs():
    now_on = book([reservation()], {7: "demo"})
    running = [Allocation(7, "gpu01", (0, 1), 1, 1024, "ada", end_time=NOW + HOUR)]
    decisions = schedule([NODE], running, [job(1, gpus=1, resv="demo")], NOW, reservations=now_on)
    assert not decisions.starts  # GPUs 2 and 3 are free, but outside the reservation
    assert decisions.reasons[1] is PendingReason.RESOURCES and decisions.estimates[1] == NOW + HOUR


def test_a_job_whose_reservation_is_gone_waits_with_reservation_deleted():
    decisions = schedule([NODE], [], [job(1, resv="gone"), job(2)], NOW, reservations=book([reservation()], {}))
    assert decisions.reasons[1] is PendingReason.RESERVATION_DELETED
    assert [a.job_id for a in decisions.starts] == [2]


@settings(max_examples=150, deadline=None)
@given(start=st.integers(0, 3 * HOUR), length=st.integers(60, 4 * HOUR), gpus=st.sets(st.integers(0, 3), min_size=1),
       wants=st.lists(st.tuples(st.integers(0, 4), st.sampled_from([600, HOUR, 5 * HOUR, None]), st.booleans()),
                      min_size=1, max_size=8))
def test_no_job_outside_ever_holds_a_reserved_gpu_inside_the_window(start, length, gpus, wants):
    held = reservation(gpus=sorted(gpus), start=NOW + start, end=NOW + start + length)
    pending = [job(i + 1, gpus=n, limit=t, resv="demo" if inside else None) for i, (n, t, inside) in enumerate(wants)]
    decisions = schedule([NODE], [], pending, NOW, reservations=book([held], {}))
    by_id = {p.job_id: p for p in pending}
    placed = [(a.job_id, NOW, a.end_time, a.gpu_ids) for a in decisions.starts]
    placed += [(j, s, s + (by_id[j].time_limit_s or 10**12), decisions.reserved[j][1])
               for j, s in decisions.estimates.items()]
    for job_id, begin, end, ids in placed:
        end = end if end is not None else float("inf")
        if by_id[job_id].reservation is None:
            if begin < held.end and held.start < end:
                assert not set(ids) & gpus, (job_id, begin, end, ids)
        else:  # a job in it: its GPUs, its window
            assert set(ids) <= gpus and held.start <= max(begin, NOW) and end <= held.end


# -- checking a new reservation --------------------------------------------------------------------

def wanted(**fields) -> Wanted:
    base = {"name": "demo", "gpus": 2, "users": "ada", "start": NOW, "end": NOW + HOUR}
    return Wanted(**{**base, **fields})


def make(w: Wanted, existing=(), running=(), drained=None, accounts=("vision",)) -> Reservation:
    return plan(w, nodes=[NODE], existing=existing, running=running, drained=drained or {},
                user_exists=lambda u: u in ("ada", "bob"), accounts=accounts, by="root", now=NOW)


def test_plan_takes_the_lowest_free_gpus_and_a_share_of_cpus_and_memory():
    running = [Allocation(9, "gpu01", (0,), 1, 0, end_time=NOW + 2 * HOUR)]
    made = make(wanted(accounts="vision"), running=running, drained={"gpu01": frozenset({1})})
    assert made.gpus == (2, 3) and made.cpus == 16 and made.mem_mb == 128 * 1024
    assert made.users == ("ada",) and made.accounts == ("vision",)
    assert make(wanted(), running=[Allocation(9, "gpu01", (0,), 1, 0, end_time=NOW)]).gpus == (0, 1)  # ended by then


@pytest.mark.parametrize(("fields", "error", "words"), [
    ({"users": "nobody_here"}, InvalidRequest, "no user 'nobody_here'"),
    ({"users": None}, InvalidRequest, "needs users or accounts"),
    ({"accounts": "physics"}, InvalidRequest, "unknown account 'physics'"),
    ({"gpu_ids": [0, 7], "gpus": None}, InvalidRequest, "has no GPU 7"),
    ({"gpus": 5}, InvalidRequest, "has 4 GPUs; cannot reserve 5"),
    ({"end": NOW - 10}, InvalidRequest, "ends before it starts"),
    ({"node": "gpu09"}, NotFound, "no such node"),
    ({"name": "bad name"}, InvalidRequest, "no reservation name"),
    ({"gpus": None}, InvalidRequest, "how many GPUs"),
])
def test_plan_names_the_field_and_the_fix(fields, error, words):
    with pytest.raises(error) as caught:
        make(wanted(**fields))
    assert words in str(caught.value)


def test_plan_refuses_gpus_of_an_overlapping_reservation_busy_gpus_and_a_taken_name():
    other = reservation(gpus=(0, 1), start=NOW + HOUR // 2, end=NOW + 2 * HOUR, name="other")
    with pytest.raises(Conflict, match="in reservation other"):
        make(wanted(gpu_ids=[1, 2]), existing=[other])
    assert make(wanted(), existing=[other]).gpus == (2, 3)
    assert make(wanted(start=NOW + 2 * HOUR, end=NOW + 3 * HOUR), existing=[other]).gpus == (0, 1)  # after it
    with pytest.raises(Conflict, match="job 9 runs on it without a time limit"):
        make(wanted(gpu_ids=[3], gpus=None), running=[Allocation(9, "gpu01", (3,), 1, 0)])
    with pytest.raises(Conflict, match="exists already"):
        make(wanted(name="other"), existing=[other])


def test_plan_never_promises_cpus_or_memory_that_running_jobs_or_other_reservations_hold():
    # a CPU-only job holds 30 of 32 CPUs for two hours: an hour's reservation asking 8 would share them
    busy = [Allocation(9, "gpu01", (), 30, 200 * 1024, end_time=NOW + 2 * HOUR)]
    with pytest.raises(Conflict) as caught:
        make(wanted(cpus=8), running=busy)
    assert "2 of 32 CPUs free" in str(caught.value) and "job 9 (until 1970-01-02T05:46:40Z)" in str(caught.value)
    assert ") holds 30" in str(caught.value)
    assert "ask for at most 2" in str(caught.value)
    with pytest.raises(Conflict, match="MB of memory free"):
        make(wanted(mem_mb=128 * 1024), running=busy)
    # its GPUs' share (16 CPUs, 128 GB) shrinks to what is free; after the job's end all of it is
    made = make(wanted(), running=busy)
    assert (made.cpus, made.mem_mb) == (2, 56 * 1024)
    later = make(wanted(start=NOW + 2 * HOUR, end=NOW + 3 * HOUR), running=busy)
    assert (later.cpus, later.mem_mb) == (16, 128 * 1024)


def test_plan_counts_overlapping_reservations_at_their_peak_not_their_sum():
    first = Reservation("first", "gpu01", (0,), 20, 0, ("ada",), (), NOW, NOW + HOUR, "root", NOW)
    second = Reservation("second", "gpu01", (1,), 20, 0, ("ada",), (), NOW + HOUR, NOW + 2 * HOUR, "root", NOW)
    # over [NOW, NOW+2h) the two never hold CPUs at once: 12 are free throughout, not 32 - 40
    made = make(wanted(gpus=None, gpu_ids=[2], cpus=12, end=NOW + 2 * HOUR), existing=[first, second])
    assert made.cpus == 12
    with pytest.raises(Conflict, match="12 of 32 CPUs free.*reservation first holds 20"):
        make(wanted(gpus=None, gpu_ids=[2], cpus=13, end=NOW + HOUR // 2), existing=[first, second])
    # with every CPU held, even the share asked for by default is refused rather than made empty
    full = [Allocation(9, "gpu01", (), 32, 0)]
    with pytest.raises(Conflict, match=r"0 of 32 CPUs free.*job 9 \(no time limit\) holds 32.*pick a window"):
        make(wanted(), running=full)


def test_sharing_jobs_in_a_reservation_share_one_of_its_gpus_and_keep_their_budgets():
    now_on = book([reservation()], {})
    sharing = [PendingJob(i, Request(gpus=1, cpus=1, mem_mb=1024, gpu_share_mb=20 * 1024), "ada", time_limit_s=HOUR,
                          reservation="demo") for i in (1, 2)]
    decisions = schedule([NODE], [], sharing, NOW, reservations=now_on)
    assert [(a.job_id, a.gpu_ids, a.gpu_share_mb) for a in decisions.starts] == [
        (1, (0,), 20 * 1024), (2, (0,), 20 * 1024)]


def test_an_update_keeps_what_it_does_not_name_and_a_new_start_keeps_the_duration():
    current = reservation(start=NOW + HOUR, end=NOW + 3 * HOUR)
    moved = wanted_update(current, {"start": "now+4hours"}, NOW)
    assert (moved.start, moved.end, moved.gpu_ids, moved.cpus, moved.users) == (
        NOW + 4 * HOUR, NOW + 6 * HOUR, (0, 1), 16, ("ada",))
    longer = wanted_update(current, {"duration": "4:00:00", "users": ["ada", "bob"]}, NOW)
    assert (longer.start, longer.end, longer.users, longer.accounts) == (NOW + HOUR, NOW + 5 * HOUR, ["ada", "bob"],
                                                                         ("vision",))
    more = wanted_update(current, {"gpus": 3}, NOW)
    assert (more.gpus, more.gpu_ids, more.cpus, more.mem_mb) == (3, None, None, None)  # their share, as when made
    with pytest.raises(InvalidRequest) as caught:
        wanted_update(current, {"node": "gpu02"}, NOW)
    assert caught.value.field == "node" and "delete it and create it again" in str(caught.value.hint)


def test_a_sharing_job_in_a_reservation_packs_beside_one_running_there():
    running = [Allocation(7, "gpu01", (0,), 1, 1024, "ada", end_time=NOW + HOUR, gpu_share_mb=20 * 1024)]
    now_on = book([reservation()], {7: "demo"})
    pending = [PendingJob(1, Request(gpus=1, cpus=1, mem_mb=1024, gpu_share_mb=20 * 1024), "ada", time_limit_s=HOUR,
                          reservation="demo")]
    decisions = schedule([NODE], running, pending, NOW, reservations=now_on)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (0,))]
