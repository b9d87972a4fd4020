"""This machine's accounts, as the job service asks about them: uids, homes, partition groups."""

from __future__ import annotations

import grp
import pwd

from corral.core.scheduling.schedconfig import Partition


def uid_of(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def home_of(user: str) -> str:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return "/"


def may_use(partition: Partition, user: str) -> bool:
    """Whether a user may submit to a partition: listed, or in one of its groups (None lists: anyone)."""
    if partition.allowed_users is None and partition.allowed_groups is None:
        return True
    if partition.allowed_users is not None and user in partition.allowed_users:
        return True
    if partition.allowed_groups:
        try:
            primary = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
        except KeyError:
            primary = None
        for group in partition.allowed_groups:
            try:
                if group == primary or user in grp.getgrnam(group).gr_mem:
                    return True
            except KeyError:
                continue
    return False
