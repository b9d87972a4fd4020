"""Job states (Slurm's names, in lifecycle order) and pending reasons."""

from __future__ import annotations

import enum


class JobState(str, enum.Enum):
    PENDING = "PENDING"
    """Accepted and queued; `reason` says what it waits for."""
    RUNNING = "RUNNING"
    """Its supervisor has been launched on its GPUs."""
    COMPLETED = "COMPLETED"
    """The command exited 0."""
    FAILED = "FAILED"
    """The command exited non-zero or was killed by a signal it did not ask for."""
    CANCELLED = "CANCELLED"
    """Cancelled by a user, before or while running."""
    TIMEOUT = "TIMEOUT"
    """Reached its time limit: SIGTERM, the grace period, then SIGKILL."""
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    """Its process tree used more resident memory than it asked for."""
    NODE_FAIL = "NODE_FAIL"
    """Its supervisor died without recording an outcome (killed, or the machine rebooted)."""
    PREEMPTED = "PREEMPTED"
    """Stopped for a job of higher priority; queued again at once (so never seen for long)."""
    DEADLINE = "DEADLINE"
    """Removed unstarted: it could no longer end (start + time limit) by its --deadline."""

    def is_terminal(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTED)


ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING)
TERMINAL_STATES = tuple(s for s in JobState if s.is_terminal())


class PendingReason(str, enum.Enum):
    """Why a pending job is not running yet (Slurm's reason codes)."""

    NONE = "None"
    """Not yet looked at by a scheduling pass."""
    RESOURCES = "Resources"
    """First in line; waiting for GPUs, CPUs or memory to free up."""
    PRIORITY = "Priority"
    """A job ahead of it in the queue is waiting; it runs after that one."""
    BAD_CONSTRAINTS = "BadConstraints"
    """No node can run it any more (the inventory shrank since it was accepted)."""
    HELD = "JobHeldUser"
    """Held by `corral hold`; `corral release` lets it run."""
    PARTITION_TIME_LIMIT = "PartitionTimeLimit"
    """Its time limit is longer than its partition allows."""
    QOS_MAX_JOBS = "QOSMaxJobsPerUserLimit"
    """Its user already runs as many jobs as the QoS allows."""
    QOS_MAX_GPUS = "QOSMaxGRESPerUser"
    """Starting it would give its user more GPUs than the QoS allows."""
    DEPENDENCY = "Dependency"
    """Waits for the jobs it depends on."""
    BEGIN_TIME = "BeginTime"
    """Its --begin time has not come yet."""
    DEADLINE = "DeadLine"
    """It could no longer end by its --deadline (the reason a job removed for it shows)."""
    NODE_NOT_AVAIL = "ReqNodeNotAvail"
    """Only drained GPUs or nodes (`corral drain`), or GPUs in use outside corral (`corral.core.monitoring.outside_use`), could
    run it; it runs once they are resumed or the process outside corral is gone."""
    RESERVATION = "Reservation"
    """Its reservation has not begun, or its time limit would run past the reservation's end."""
    RESERVATION_DELETED = "ReservationDeleted"
    """Its reservation ended or was deleted: held (as Slurm holds it) until released, to run outside it."""
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"
    """What it depends on can no longer happen (cancelled if it asked for --kill-on-invalid-dep)."""
