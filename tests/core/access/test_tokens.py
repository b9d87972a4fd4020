"""API tokens as data: their shape, their hash, names, lifetimes, and who may make or revoke one."""

from __future__ import annotations

import hashlib

import pytest

from corral.core.access.identity import AccessPolicy, Caller
from corral.core.access.tokens import (
    MAX_LIFETIME_S, ApiToken, authorize_create, authorize_revoke, check_name, check_token_scope, check_user, hash_secret,
    looks_like_token, new_secret, parse_expiry,
)
from corral.errors import Forbidden, InvalidRequest

NOW = 1_800_000_000.0
POLICY = AccessPolicy(admins=frozenset({"boss"}))


def test_a_token_is_the_prefix_and_256_random_bits_never_repeated():
    secrets_made = {new_secret() for _ in range(1000)}
    assert len(secrets_made) == 1000
    for secret in secrets_made:
        assert secret.startswith("corral_") and len(secret) == len("corral_") + 43
        assert looks_like_token(secret)


def test_the_token_shape_check_refuses_near_misses():
    good = new_secret()
    assert not looks_like_token(good[:-1])
    assert not looks_like_token(good + "x")
    assert not looks_like_token(good + "\n")
    assert not looks_like_token("ghp_" + good[7:])
    assert not looks_like_token(good[:-1] + "/")


def test_the_hash_is_sha256_hex_of_the_whole_token_and_differs_per_token():
    secret = new_secret()
    assert hash_secret(secret) == hashlib.sha256(secret.encode()).hexdigest()
    assert len(hash_secret(secret)) == 64
    assert hash_secret(secret) != hash_secret(new_secret())
    assert secret not in hash_secret(secret)


@pytest.mark.parametrize("name", ["a", "laptop-sdk", "ci_runner.2", "x" * 64])
def test_names_of_letters_digits_and_dash_underscore_dot_are_accepted(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 65, "has space", "semi;colon", "naïve", "line\n", 7, None])
def test_other_names_are_refused_naming_the_field_and_the_rule(name):
    with pytest.raises(InvalidRequest) as info:
        check_name(name)
    assert info.value.field == "name" and "64" in info.value.hint


@pytest.mark.parametrize("scope", ["root", "", "Admin", {"a": 1}, ["read"], None, 1])
def test_a_scope_that_is_not_read_submit_or_admin_is_refused_naming_them(scope):
    with pytest.raises(InvalidRequest) as info:
        check_token_scope(scope)
    assert info.value.field == "scope" and "read, submit, admin" in info.value.hint


@pytest.mark.parametrize("text, seconds", [("90m", 5400), ("12h", 43200), ("30d", 30 * 86400), ("8w", 56 * 86400),
                                           (" 1d ", 86400), ("365d", MAX_LIFETIME_S)])
def test_lifetimes_in_minutes_hours_days_and_weeks_count_from_now(text, seconds):
    assert parse_expiry(text, NOW) == NOW + seconds


@pytest.mark.parametrize("text", ["never", "NEVER", "unlimited", "0"])
def test_a_token_that_never_expires_is_refused(text):
    with pytest.raises(InvalidRequest) as info:
        parse_expiry(text, NOW)
    assert info.value.field == "expires" and "every token expires" in info.value.message
    assert "365d" in info.value.hint


@pytest.mark.parametrize("text", ["366d", "53w", "9000h"])
def test_a_lifetime_over_a_year_is_refused_with_the_limit(text):
    with pytest.raises(InvalidRequest) as info:
        parse_expiry(text, NOW)
    assert info.value.field == "expires" and "at most 365d" in info.value.hint


@pytest.mark.parametrize("text", ["30", "1y", "6M", "30 days", "-1d", "1.5d", "0d", "", 30, None])
def test_unreadable_lifetimes_are_refused_with_the_forms_understood(text):
    with pytest.raises(InvalidRequest) as info:
        parse_expiry(text, NOW)
    assert info.value.field == "expires"
    assert info.value.hint and ("30d" in info.value.hint)


@pytest.mark.parametrize("user", ["alice", "svc-ci", "a.b_c", "_x"])
def test_login_names_are_valid_users(user):
    assert check_user(user) == user


@pytest.mark.parametrize("user", ["", "-rf", "a b", "a/b", "x" * 65, 3])
def test_other_users_are_refused(user):
    with pytest.raises(InvalidRequest) as info:
        check_user(user)
    assert info.value.field == "user"


def _token(**kw) -> ApiToken:
    fields = dict(id=3, user="alice", name="laptop", scope="submit", created=NOW, expires=NOW + 60, revoked=None,
                  created_by="alice")
    return ApiToken(**(fields | kw))


def test_a_token_is_active_until_it_expires_and_revoked_wins():
    token = _token()
    assert token.state(NOW) == "active"
    assert token.state(NOW + 60) == "expired"
    assert _token(revoked=NOW + 1).state(NOW + 2) == "revoked"
    assert _token(revoked=NOW + 1).state(NOW + 120) == "revoked"


def test_the_record_as_json_has_iso_times_and_state_and_no_secret():
    out = _token(revoked=NOW + 30).to_dict(NOW + 40)
    assert out == {"id": 3, "user": "alice", "name": "laptop", "scope": "submit", "created": "2027-01-15T08:00:00Z",
                   "expires": "2027-01-15T08:01:00Z", "revoked": "2027-01-15T08:00:30Z", "created_by": "alice",
                   "state": "revoked"}
    assert not any("hash" in key or "secret" in key or "token" in key for key in out)
    assert "state" not in _token().to_dict()


def _caller(user="alice", scope="submit", via="socket", token_id=None) -> Caller:
    return Caller(user, scope, via, token_id)


def test_a_submit_caller_makes_read_and_submit_tokens_for_itself():
    authorize_create(POLICY, _caller(), "alice", "submit")
    authorize_create(POLICY, _caller(), "alice", "read")


def test_a_token_cannot_mint_tokens_that_would_outlive_its_revocation():
    for via in ("token", "session"):
        with pytest.raises(Forbidden, match="not with another token"):
            authorize_create(POLICY, _caller(via=via), "alice", "read")
    authorize_create(POLICY, _caller("boss", "admin", "token"), "alice", "read")  # an admin's token may


def test_a_read_credential_cannot_make_tokens():
    with pytest.raises(Forbidden, match="needs a credential with submit scope"):
        authorize_create(POLICY, _caller(scope="read"), "alice", "read")


def test_a_token_never_exceeds_the_credential_that_made_it():
    boss_by_submit_token = _caller("boss", "submit")
    with pytest.raises(Forbidden, match="admin token cannot be made with a submit credential"):
        authorize_create(POLICY, boss_by_submit_token, "boss", "admin")


def test_a_token_never_exceeds_what_its_user_may_hold():
    with pytest.raises(Forbidden, match="alice may hold at most submit"):
        authorize_create(POLICY, _caller("boss", "admin", "socket"), "alice", "admin")
    authorize_create(POLICY, _caller("boss", "admin", "socket"), "boss", "admin")


def test_only_an_admin_makes_tokens_for_another_user():
    with pytest.raises(Forbidden, match="creating a token for bob needs admin"):
        authorize_create(POLICY, _caller(), "bob", "read")
    authorize_create(POLICY, _caller("boss", "admin", "socket"), "bob", "submit")


def test_owners_and_admins_revoke_a_token_and_others_may_not():
    token = _token(user="alice")
    authorize_revoke(POLICY, _caller("alice", "submit", "socket"), token)
    authorize_revoke(POLICY, _caller("boss", "admin", "socket"), token)
    with pytest.raises(Forbidden, match="only its owner or an admin"):
        authorize_revoke(POLICY, _caller("bob", "submit", "socket"), token)


def test_a_read_token_revokes_itself_but_not_its_owners_other_tokens():
    token = _token(id=7, scope="read")
    authorize_revoke(POLICY, _caller("alice", "read", "token", token_id=7), token)
    with pytest.raises(Forbidden, match="submit scope"):
        authorize_revoke(POLICY, _caller("alice", "read", "token", token_id=8), token)
