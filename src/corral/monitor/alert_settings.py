"""Alert settings as requests: rules, channels and firings, made, changed, listed (`AlertSettings`).

A change to the rules or to a channel's sharing runs on the monitor's worker thread, which the rule
evaluator owns, so a tick never sees half of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from corral.core.monitoring import alerts as A
from corral.errors import Conflict, InvalidRequest, NotFound
from corral.monitor.views import channel_view, firing_view, rule_of, rule_view
from corral.store.monitoring import MonitorStore

if TYPE_CHECKING:
    from corral.monitor.channels import SmtpSettings
    from corral.monitor.rules import RuleEvaluator
    from corral.monitor.runtime import Announcer, MonitorThreads


class AlertSettings:
    def __init__(self, *, threads: MonitorThreads, store: MonitorStore, evaluator: RuleEvaluator, announcer: Announcer,
                 smtp: SmtpSettings, server_user: str, clock: Callable[[], float]) -> None:
        self.threads = threads
        self.store = store
        self.evaluator = evaluator
        self.announcer = announcer
        self.smtp = smtp
        self.server_user = server_user
        self.clock = clock

    async def create_rule(self, body: Any, owner: str, admin: bool = True) -> dict[str, Any]:
        """A new rule of `owner`'s; `admin`: whether they are one (others name only channels shared with them).

        Raises:
            InvalidRequest; Conflict: the name is taken; NotFound: no such channel; Forbidden: an unshared channel.
        """
        if not isinstance(body, Mapping):
            raise InvalidRequest("body", "must be a JSON object")
        known = {"name", "severity", "condition", "message", "job", "label", "user", "channels"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise InvalidRequest(unknown[0], "unknown field", f"known: {', '.join(sorted(known))}")
        name, severity, message = A.check_rule_fields(body.get("name"), body.get("severity", "warning"), body.get("message"))
        condition = A.parse_condition(body.get("condition"))  # type: ignore[arg-type]
        scope = A.parse_scope(body.get("job"), body.get("label"), body.get("user"))
        channels = body.get("channels") or []
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise InvalidRequest("channels", "must be a list of channel names")
        row = {
            "name": name, "severity": severity, "condition": condition.text, "message": message,
            "scope_job": scope.job_id, "scope_label": "=".join(scope.label) if scope.label else None,
            "scope_user": scope.user, "channels": list(dict.fromkeys(channels)), "owner": owner, "created": self.clock(),
        }

        def apply() -> dict[str, Any]:
            with self.threads.engine.begin() as conn:
                rule_id = self.store.add_rule(conn, row, admin=admin)
                saved = self.store.rule(conn, name)
            self.evaluator.rules = [*self.evaluator.rules, rule_of(saved)]
            return rule_view(saved) | {"id": rule_id}

        created = await self.threads.on_worker(apply)
        self._publish_alerts()
        return created

    def _publish_alerts(self) -> None:
        self.announcer.publish("alerts", {})

    async def rules(self) -> list[dict[str, Any]]:
        return await self.threads.read(lambda conn: [rule_view(r) for r in self.store.rules(conn)])

    async def delete_rule(self, name: str) -> None:
        def apply() -> None:
            with self.threads.engine.begin() as conn:
                rule = self.store.rule(conn, name)
                self.store.delete_rule(conn, name, self.clock())
            self.evaluator.drop_rule(rule["id"])

        await self.threads.on_worker(apply)
        self._publish_alerts()

    async def put_channel(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        """Create a channel (`owner`'s, shared with nobody) or replace one's settings."""
        from corral.monitor.channels import parse_channel

        channel = parse_channel(body)

        def apply() -> dict[str, Any]:
            with self.threads.engine.begin() as conn:
                self.store.put_channel(conn, channel.name, channel.type, channel.config, self.clock(), owner)
                saved = next(c for c in self.store.channels(conn) if c["name"] == channel.name)
            self.evaluator.sharing[channel.name] = saved["shared_with"]
            return channel_view(saved)

        return await self.threads.on_worker(apply)

    async def share_channel(self, name: str, body: Any) -> dict[str, Any]:
        """Say whom besides admins a channel is for: `{"users": [...]}` (empty: nobody) or `{"all": true}`.

        Raises:
            InvalidRequest: a bad body; NotFound: no such channel.
        """
        shared_with = A.parse_sharing(body)

        def apply() -> dict[str, Any]:
            with self.threads.engine.begin() as conn:
                self.store.share_channel(conn, name, shared_with)
                saved = next(c for c in self.store.channels(conn) if c["name"] == name)
            self.evaluator.sharing[name] = saved["shared_with"]
            return channel_view(saved)

        return await self.threads.on_worker(apply)

    async def channels(self, user: str | None = None) -> list[dict[str, Any]]:
        """The channels; for `user` (not an admin), only those shared with them."""
        return await self.threads.read(lambda conn: [channel_view(c) for c in self.store.channels(conn)
                                              if user is None or A.may_use_channel(c["shared_with"], user, False)])

    async def delete_channel(self, name: str) -> None:
        def apply() -> None:
            with self.threads.engine.begin() as conn:
                self.store.delete_channel(conn, name)
            self.evaluator.sharing.pop(name, None)

        await self.threads.on_worker(apply)

    async def test_channel(self, name: str) -> dict[str, Any]:
        """Send a test notification now, once, without retries; the error if it fails."""
        from corral.monitor.channels import Channel, DeliveryError, Notification, deliver

        def send() -> dict[str, Any]:
            with self.threads.engine.begin() as conn:
                found = next((c for c in self.store.channels(conn) if c["name"] == name), None)
            if found is None:
                raise NotFound(f"no alert channel named {name!r}")
            note = Notification(
                firing_id=0, rule="test", severity="info", status="firing", condition="test",
                message="a test notification from corral: this channel works", job_id=None, job_name=None,
                user=self.server_user, value=None, fired_at=self.clock(), resolved_at=None)
            try:
                deliver(Channel(found["name"], found["type"], found["config"]), note, self.smtp)
            except DeliveryError as exc:
                raise Conflict(f"the test notification did not get through: {exc.message}") from None
            except Exception as exc:  # noqa: BLE001 - answered as a failed test, never a 500
                raise Conflict(f"the test notification did not get through: {type(exc).__name__}") from None
            return {"channel": name, "sent": True}

        return await self.threads.on_reader(send)

    async def firings(self, *, status: str | None, job_id: int | None, unacknowledged: bool, limit: int,
                      user: str | None = None) -> list[dict[str, Any]]:
        """Firings newest first; `user`: only those about that user's jobs (what a non-admin sees)."""
        if status not in (None, "firing", "fired", "resolved"):
            raise InvalidRequest("status", f"must be firing, fired or resolved, got {status!r}",
                                 "firing: open; fired: about a job that ended; resolved: its condition cleared")
        return await self.threads.read(lambda conn: [firing_view(f) for f in self.store.firings(
            conn, status=status, job_id=job_id, unacknowledged=unacknowledged, limit=limit, user=user)])

    async def acknowledge(self, firing_id: int, user: str,
                          check_owner: Callable[[str | None], None] = lambda owner: None) -> dict[str, Any]:
        """`user` acknowledges a firing; `check_owner` raises unless they may, given whose job it is about.

        Raises:
            NotFound: no such firing; Forbidden: from `check_owner`.
        """
        def apply() -> dict[str, Any]:
            with self.threads.engine.begin() as conn:
                check_owner(self.store.firing_owner(conn, firing_id))
                return firing_view(self.store.acknowledge(conn, firing_id, user, self.clock()))

        acknowledged = await self.threads.on_worker(apply)
        self.announcer.publish("alerts", {"acknowledged": firing_id})
        return acknowledged
