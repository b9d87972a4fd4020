"""Per-key concurrency caps: what one key holds never counts against another."""

from __future__ import annotations

from corral.core.access.caps import ConcurrencyCap
from corral.core.access.ratelimit import RateLimiter


def test_a_key_at_its_cap_is_refused_and_others_are_not():
    cap = ConcurrencyCap(2)
    assert cap.acquire("alice") and cap.acquire("alice")
    assert not cap.acquire("alice")
    assert cap.held("alice") == 2
    assert cap.acquire("bob")
    cap.release("alice")
    assert cap.acquire("alice")


def test_a_released_key_is_forgotten_and_zero_means_no_limit():
    cap = ConcurrencyCap(1)
    assert cap.acquire("alice")
    cap.release("alice")
    cap.release("alice")  # one too many gives nothing extra
    assert cap.held("alice") == 0 and cap._held == {}
    assert cap.acquire("alice") and not cap.acquire("alice")
    unlimited = ConcurrencyCap(0)
    assert all(unlimited.acquire("alice") for _ in range(10_000))


def test_waiting_on_a_bucket_spends_nothing():
    now = [0.0]
    limiter = RateLimiter(5.0, 2.0, lambda: now[0])
    assert limiter.wait("peer") == 0.0
    assert limiter.take("peer") == 0.0 and limiter.take("peer") == 0.0
    assert limiter.wait("peer") == limiter.wait("peer") > 0  # asking twice costs nothing
    now[0] += 0.2  # one refilled
    assert limiter.wait("peer") == 0.0 and limiter.take("peer") == 0.0
    assert limiter.wait("other") == 0.0
