"""The associations and their fair share, as Slurm's `sacctmgr` and `sshare` show them (`corral.core.scheduling.associations`):
what `GET /api/v1/associations` answers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from corral.core.scheduling.associations import ROOT, Association, RunningUse, accounting_users, association_tree
from corral.core.access.identity import Caller
from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.server.service import JobService

CLUSTER = "corral"  # the ClusterName corral's `scontrol show config` gives


def associations_view(service: JobService, caller: Caller) -> dict[str, Any]:
    """The accounts, the users and the association tree with each association's fair share, as of now.

    The users shown: every account's members and coordinators, the admins, those with `[scheduler.shares]`,
    those fair share counts now (pending jobs, decayed usage), the server's owner and the caller."""
    now = service.clock()
    access = service.access
    config = service.scheduler_config
    counted = {job.spec.user for job, _ in service.priorities()}
    usage = service.usage(now)
    known = counted | set(usage) | set(config.shares) | set(access.admins) | {caller.user}
    if access.owner is not None:
        known.add(access.owner)
    running = [RunningUse(job.spec.user, job.spec.account, job.spec.cpus, job.spec.mem_mb, job.spec.nodes, job.spec.gpus,
                          None if not job.spec.time_limit_s or job.start_time is None
                          else job.spec.time_limit_s - (now - job.start_time))
               for job in service.active.values() if job.state is JobState.RUNNING]
    tree = association_tree(accounts=access.accounts, users=known, shares=config.shares, usage=usage,
                            counted=counted, running=running)
    admins = [a.user for a in tree if a.user is not None and access.scope_of(a.user) == "admin"]
    return {
        "cluster": CLUSTER,
        "qos": sorted(config.qos),
        "default_qos": config.default_qos if "qos" in config.configured else None,
        "accounts": [{"name": ROOT, "description": "default root account", "organization": ROOT, "coordinators": []}]
        + [{"name": name, "description": name, "organization": name,
            "coordinators": sorted(access.accounts[name].coordinators)} for name in sorted(access.accounts)],
        "users": [{"name": u.name, "default_account": u.default_account, "admin": u.admin,
                   "coordinates": list(u.coordinates)} for u in accounting_users(tree, access.accounts, admins)],
        "associations": [_association(a) for a in tree],
    }


def _association(a: Association) -> dict[str, Any]:
    return {"id": a.id, "account": a.account, "user": a.user, "parent": a.parent, "parent_id": a.parent_id,
            "lft": a.lft, "rgt": a.rgt, "shares": "parent" if a.shares is None else a.shares,
            "norm_shares": a.norm_shares, "raw_usage": a.raw_usage, "norm_usage": a.norm_usage,
            "effective_usage": a.effective_usage, "fairshare": a.fairshare,
            "level_fs": None if a.level_fs is None else ("inf" if math.isinf(a.level_fs) else a.level_fs),
            "is_default": a.is_default, "tres_run_mins": dict(a.tres_run_mins)}
