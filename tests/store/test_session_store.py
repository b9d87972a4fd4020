"""The dashboard's session store against real SQLite and PostgreSQL: only the pair's hash kept; a session
needs both halves, ends at its expiry, at logout, and with its token."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from corral.core.access.sessions import hash_session, looks_like_session_part, session_expiry
from corral.core.access.tokens import looks_like_token
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.schema import dashboard_sessions
from corral.store.sessions import KEEP_DEAD_S, SessionStore
from corral.store.tokens import TokenStore

NOW = 1_800_000_000.0
HOUR = 3600.0


@pytest.fixture
def stores(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    yield TokenStore(engine), SessionStore(engine)
    engine.dispose()


def _rows(store: SessionStore) -> list[dict]:
    with store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(dashboard_sessions))]


def test_a_session_is_two_fresh_secrets_and_the_database_holds_only_their_hash(stores):
    tokens, sessions = stores
    token, _ = tokens.create("alice", "laptop", "read", NOW + 30 * 24 * HOUR, "alice", NOW)
    session, cookie, key = sessions.create("alice", "read", token.id, NOW + 8 * HOUR, NOW)
    assert (session.user, session.scope, session.token_id, session.created, session.expires, session.ended) == (
        "alice", "read", token.id, NOW, NOW + 8 * HOUR, None)
    assert cookie != key and looks_like_session_part(cookie) and looks_like_session_part(key)
    assert not looks_like_token(cookie) and not looks_like_token(key)  # neither passes for an API token
    [row] = _rows(sessions)
    assert row["secret_hash"] == hash_session(cookie, key)
    assert not any(part in str(value) for value in row.values() for part in (cookie, key))
    assert cookie not in str(session.to_dict()) and key not in str(session.to_dict())


def test_a_session_opens_only_with_both_halves(stores):
    tokens, sessions = stores
    token, _ = tokens.create("alice", "laptop", "submit", NOW + 24 * HOUR, "alice", NOW)
    session, cookie, key = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)
    other, other_cookie, other_key = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)
    assert sessions.lookup(cookie, key, NOW + 1) == session
    assert sessions.lookup(other_cookie, other_key, NOW + 1) == other
    for wrong in ((cookie, ""), ("", key), (cookie, other_key), (other_cookie, key), (key, cookie),
                  (hash_session(cookie, key), "")):
        assert sessions.lookup(*wrong, NOW + 1) is None, wrong


def test_a_session_ends_at_its_expiry_at_logout_and_with_its_token(stores):
    tokens, sessions = stores
    token, _ = tokens.create("alice", "laptop", "submit", NOW + 24 * HOUR, "alice", NOW)
    expiring, c1, k1 = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)
    assert sessions.lookup(c1, k1, NOW + HOUR - 0.1) == expiring
    assert sessions.lookup(c1, k1, NOW + HOUR) is None

    _, c2, k2 = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)
    assert sessions.end(c2, k2, NOW + 5) is True
    assert sessions.lookup(c2, k2, NOW + 6) is None
    assert sessions.end(c2, k2, NOW + 7) is False  # already over: nothing more to end
    assert sessions.end(c2, "", NOW + 7) is False

    live, c3, k3 = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)
    assert sessions.lookup(c3, k3, NOW + 10) == live
    tokens.revoke(token.id, NOW + 11)
    assert sessions.lookup(c3, k3, NOW + 12) is None  # the token it was made with is revoked


def test_a_session_never_outlives_its_token():
    assert session_expiry(NOW, NOW + 24 * HOUR, 8) == NOW + 8 * HOUR
    assert session_expiry(NOW, NOW + 60, 8) == NOW + 60


def test_a_token_that_expired_ends_its_sessions_even_if_the_session_claims_longer(stores):
    tokens, sessions = stores
    token, _ = tokens.create("alice", "laptop", "submit", NOW + 60, "alice", NOW)
    _, cookie, key = sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)  # a row written before any cap
    assert sessions.lookup(cookie, key, NOW + 59) is not None
    assert sessions.lookup(cookie, key, NOW + 60) is None


def test_logins_prune_sessions_dead_for_over_a_day(stores):
    tokens, sessions = stores
    token, _ = tokens.create("alice", "laptop", "submit", NOW + 30 * 24 * HOUR, "alice", NOW)
    sessions.create("alice", "submit", token.id, NOW + HOUR, NOW)  # expires
    _, cookie, key = sessions.create("alice", "submit", token.id, NOW + 48 * HOUR, NOW)
    sessions.end(cookie, key, NOW + 2 * HOUR)  # logged out
    recent, *_ = sessions.create("alice", "submit", token.id, NOW + 48 * HOUR, NOW + 2 * HOUR)
    assert len(_rows(sessions)) == 3
    later, *_ = sessions.create("alice", "submit", token.id, NOW + 60 * HOUR, NOW + 2 * HOUR + KEEP_DEAD_S + 1)
    assert sorted(row["id"] for row in _rows(sessions)) == [recent.id, later.id]
