"""The token store against real SQLite and PostgreSQL: only hashes kept; lookups refuse revoked and expired tokens."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from corral.core.access.tokens import hash_secret, looks_like_token
from corral.errors import InvalidRequest, NotFound
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.schema import api_tokens
from corral.store.tokens import TokenStore

NOW = 1_800_000_000.0
DAY = 86400.0


@pytest.fixture
def store(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    yield TokenStore(engine)
    engine.dispose()


def _all_columns(store: TokenStore) -> list[dict]:
    with store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(api_tokens))]


def test_create_returns_the_secret_once_and_the_database_holds_only_its_hash(store):
    token, secret = store.create("alice", "laptop", "submit", NOW + 30 * DAY, "alice", NOW)
    assert looks_like_token(secret)
    assert (token.user, token.name, token.scope, token.created, token.expires, token.revoked, token.created_by) == (
        "alice", "laptop", "submit", NOW, NOW + 30 * DAY, None, "alice")
    [row] = _all_columns(store)
    assert row["secret_hash"] == hash_secret(secret)
    assert not any(secret in str(value) for value in row.values())
    assert "secret" not in str(token.to_dict(NOW)) and hash_secret(secret) not in str(token.to_dict(NOW))


def test_lookup_finds_a_live_token_by_its_secret_and_nothing_by_anything_else(store):
    token, secret = store.create("alice", "ci", "read", NOW + DAY, "boss", NOW)
    assert store.lookup(secret, NOW + 1) == token
    assert store.lookup(secret[:-1] + ("A" if secret[-1] != "A" else "B"), NOW + 1) is None
    assert store.lookup(hash_secret(secret), NOW + 1) is None  # the hash itself is no credential
    assert store.lookup("", NOW) is None


def test_an_expired_token_no_longer_looks_up(store):
    token, secret = store.create("alice", "short", "submit", NOW + 60, "alice", NOW)
    assert store.lookup(secret, NOW + 59.9) == token
    assert store.lookup(secret, NOW + 60) is None
    assert store.lookup(secret, NOW + DAY) is None


def test_a_revoked_token_stops_at_once_and_revoking_again_keeps_the_first_time(store):
    token, secret = store.create("alice", "laptop", "submit", NOW + DAY, "alice", NOW)
    other, other_secret = store.create("alice", "desktop", "submit", NOW + DAY, "alice", NOW)
    revoked = store.revoke(token.id, NOW + 10)
    assert revoked.revoked == NOW + 10 and revoked.state(NOW + 11) == "revoked"
    assert store.lookup(secret, NOW + 11) is None
    assert store.lookup(other_secret, NOW + 11) == other  # only that one
    assert store.revoke(token.id, NOW + 20).revoked == NOW + 10


def test_revoking_an_unknown_token_is_not_found(store):
    with pytest.raises(NotFound, match="no API token 999"):
        store.revoke(999, NOW)
    with pytest.raises(NotFound):
        store.get(999)


def test_list_gives_one_users_tokens_or_everyones_newest_first_with_dead_ones(store):
    a1, _ = store.create("alice", "one", "submit", NOW + DAY, "alice", NOW)
    b1, _ = store.create("bob", "one", "read", NOW + DAY, "boss", NOW + 1)
    a2, _ = store.create("alice", "two", "read", NOW + 60, "alice", NOW + 2)
    store.revoke(a1.id, NOW + 3)
    assert [t.id for t in store.list("alice")] == [a2.id, a1.id]
    assert [t.id for t in store.list()] == [a2.id, b1.id, a1.id]
    assert store.list("carol") == []
    assert [t.state(NOW + 120) for t in store.list("alice")] == ["expired", "revoked"]
    assert store.get(b1.id) == b1


def test_two_tokens_with_the_same_name_are_two_secrets(store):
    one, s1 = store.create("alice", "laptop", "submit", NOW + DAY, "alice", NOW)
    two, s2 = store.create("alice", "laptop", "submit", NOW + DAY, "alice", NOW)
    assert one.id != two.id and s1 != s2
    assert store.lookup(s1, NOW) == one and store.lookup(s2, NOW) == two


def test_a_bad_name_or_scope_never_reaches_the_table(store):
    with pytest.raises(InvalidRequest, match="name"):
        store.create("alice", "no spaces", "submit", NOW + DAY, "alice", NOW)
    with pytest.raises(InvalidRequest, match="scope"):
        store.create("alice", "x", "root", NOW + DAY, "alice", NOW)
    assert _all_columns(store) == []


def test_a_name_with_quotes_is_stored_as_data(store):
    # names are checked, but user names come from the kernel or an admin: they must pass as bound values
    token, secret = store.create("o'brien", "x", "read", NOW + DAY, "o'brien", NOW)
    assert store.list("o'brien") == [token] and store.lookup(secret, NOW) == token
