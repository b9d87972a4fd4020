"""The access policy and the rate limiter: pure rules, tested without a server."""

from __future__ import annotations

import pytest

from corral.core.access.identity import AccessPolicy, Account, Caller, parse_accounts
from corral.core.access.ratelimit import RateLimiter
from corral.errors import Forbidden, InvalidRequest

SHARED = AccessPolicy(admins=frozenset({"boss"}), accounts={
    "vision": Account("vision", frozenset({"alice", "bob"}), frozenset({"carol"})),
    "nlp": Account("nlp", frozenset({"alice"})),
})


def local(user: str, policy: AccessPolicy = SHARED) -> Caller:
    return Caller(user, policy.scope_of(user), "socket")


def test_a_personal_queue_admits_its_owner_and_root_only():
    personal = AccessPolicy(owner="alice")
    personal.admit(local("alice", personal))
    personal.admit(local("root", personal))
    with pytest.raises(Forbidden, match="alice's personal queue; user bob may not use it"):
        personal.admit(local("bob", personal))
    assert local("alice", personal).is_admin  # the owner of a personal queue runs it


def test_on_a_shared_server_admins_are_configured_and_root_is_one():
    assert local("boss").is_admin and local("root").is_admin
    assert local("alice").scope == "submit" and not local("alice").is_admin


def test_owner_admin_and_the_accounts_coordinator_may_manage_a_job_and_nobody_else():
    assert SHARED.may_manage(local("alice"), "alice", "vision")
    assert SHARED.may_manage(local("boss"), "alice", "vision")
    assert SHARED.may_manage(local("carol"), "alice", "vision")
    assert not SHARED.may_manage(local("carol"), "alice", "nlp")  # coordinates vision, not nlp
    assert not SHARED.may_manage(local("bob"), "alice", "vision")  # a member is no coordinator
    assert not SHARED.may_manage(Caller("alice", "read", "token"), "alice", "vision")  # a read token changes nothing
    with pytest.raises(Forbidden, match=r"only its owner \(alice\), an admin or a coordinator of account vision"):
        SHARED.check_manage(local("bob"), "alice", "vision", "cancelling job 7")


def test_a_jobs_account_is_the_one_asked_for_else_the_users_first():
    assert SHARED.account_for("alice", None) == "nlp"
    assert SHARED.account_for("alice", "vision") == "vision"
    assert SHARED.account_for("dave", None) is None
    with pytest.raises(InvalidRequest, match="bob is not a member of account nlp"):
        SHARED.account_for("bob", "nlp")
    with pytest.raises(InvalidRequest, match="known accounts: nlp, vision"):
        SHARED.account_for("bob", "nope")


def test_accounts_config_errors_name_the_key():
    assert parse_accounts({"a": {"members": ["x"], "coordinators": ["y"]}}, "c.toml")["a"].coordinators == {"y"}
    with pytest.raises(InvalidRequest, match="accounts.a.owners: unknown key"):
        parse_accounts({"a": {"owners": ["x"]}}, "c.toml")
    with pytest.raises(InvalidRequest, match="accounts.a.members: must be a list of user names"):
        parse_accounts({"a": {"members": "x"}}, "c.toml")


def test_the_rate_limiter_allows_a_burst_then_the_rate_per_key():
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=3.0, clock=lambda: now[0])
    assert [limiter.take("alice") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("alice") == pytest.approx(0.5)
    assert limiter.take("bob") == 0.0  # one user's flood costs the others nothing
    now[0] = 0.5
    assert limiter.take("alice") == 0.0 and limiter.take("alice") > 0
