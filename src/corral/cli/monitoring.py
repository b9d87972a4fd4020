"""The monitoring commands: `corral top`, `eff`, `diagnose` and `alert ...`.

Registered on the main group by `corral.cli.main`; each parses its options and makes
its calls to the client.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.terminal import escape, json_text, print_json


@click.command()
@click.option("--once", is_flag=True, help="Print once and exit (the default when stdout is not a terminal).")
@click.option("-i", "--interval", type=click.FloatRange(0.5, 3600), default=2.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def top(ctx: click.Context, once: bool, interval: float, as_json: bool) -> None:
    """Running jobs, live: their GPUs' utilization and memory, CPU, RSS, and training step, rate and ETA."""
    from corral.cli.format_monitor import top_table

    client = client_for(ctx)
    if as_json:
        print_json(client.top())
        return
    live = not once and sys.stdout.isatty()
    while True:
        text = top_table(client.top(), time.time())
        if not live:
            click.echo(text)
            return
        click.clear()
        click.echo(f"corral top - {time.strftime('%H:%M:%S')} (every {interval:g} s; Ctrl-C quits)\n{text}")
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def eff(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """How well a job used its CPUs, memory and GPUs against what it asked for, like seff, with advice."""
    from corral.cli.format_monitoring import format_efficiency

    client = client_for(ctx)
    report = client.efficiency(job_id)
    if as_json:
        print_json(report)
        return
    click.echo(format_efficiency(client.get(job_id), report))


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def diagnose(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Why a job failed or runs badly: the likely cause, the evidence (numbers, log lines) and the fix."""
    result = client_for(ctx).diagnose(job_id)
    if as_json:
        print_json(result)
        return
    from corral.cli.format_monitoring import format_diagnosis
    from corral.core.monitoring.findings import Finding

    findings = [Finding(f["cause"], f["title"], tuple(f["evidence"]), tuple(f["fixes"]), f["severity"])
                for f in result["findings"]]
    click.echo(format_diagnosis(result["job"], findings, result.get("unchecked") or ()))


@click.group()
def alert() -> None:
    """Alert rules, their firings, and the channels they go out on."""


@alert.command("create")
@click.argument("name")
@click.option("-c", "--condition", required=True,
              help="e.g. 'state == FAILED', 'gpu_utilization < 10 for 15m', 'metric.loss is nan', "
                   "'no_progress for 30m', 'time_left < 10m', 'queue_wait > 1h'.")
@click.option("-s", "--severity", type=click.Choice(["info", "warning", "critical"]), default="warning", show_default=True)
@click.option("-m", "--message", default="", help="Text sent; {job} {name} {user} {state} {value} {rule} are filled in.")
@click.option("-j", "--job", "job", type=click.IntRange(1, 2**31 - 1), help="Only this job (or array).")
@click.option("-l", "--label", help="Only jobs with this label, KEY=VALUE.")
@click.option("-u", "--user", help="Only this user's jobs.")
@click.option("--channel", "channels", multiple=True, help="Send to this channel (repeatable).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def alert_create(ctx: click.Context, name: str, condition: str, severity: str, message: str, job: int | None,
                 label: str | None, user: str | None, channels: tuple[str, ...], as_json: bool) -> None:
    """Create a rule: it fires once when its condition holds for a job, and resolves when it clears."""
    rule = client_for(ctx).create_alert(name, condition, severity=severity, message=message, job=job, label=label,
                                        user=user, channels=channels)
    if as_json:
        print_json(rule)
    else:
        click.echo(escape(f"alert rule {rule['name']}: {rule['condition']} ({rule['severity']})"))


@alert.command("rules")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def alert_rules(ctx: click.Context, as_json: bool) -> None:
    """The alert rules."""
    from corral.cli.format_monitor import rules_table

    rules = client_for(ctx).alert_rules()
    click.echo(json_text(rules) if as_json else rules_table(rules))


@alert.command("delete")
@click.argument("name")
@click.pass_context
def alert_delete(ctx: click.Context, name: str) -> None:
    """Delete a rule; its open firings resolve."""
    client_for(ctx).delete_alert(name)
    click.echo(f"alert rule {name} deleted")


@alert.command("list")
@click.option("-a", "--all", "show_all", is_flag=True, help="Acknowledged firings too.")
@click.option("-j", "--job", "job", type=click.IntRange(1, 2**31 - 1), help="Only this job's firings.")
@click.option("-n", "--limit", type=click.IntRange(1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def alert_list(ctx: click.Context, show_all: bool, job: int | None, limit: int, as_json: bool) -> None:
    """Alert firings, newest first, and whether each channel got them (those not acknowledged, by default)."""
    from corral.cli.format_monitor import firings_table

    found = client_for(ctx).alerts(job=job, unacknowledged=not show_all, limit=limit)
    click.echo(json_text(found) if as_json else firings_table(found))


@alert.command("ack")
@click.argument("firing_ids", nargs=-1, required=True, type=click.IntRange(1))
@click.pass_context
def alert_ack(ctx: click.Context, firing_ids: tuple[int, ...]) -> None:
    """Acknowledge firings: they leave the default `corral alert list`."""
    client = client_for(ctx)
    for firing_id in firing_ids:
        client.acknowledge(firing_id)
        click.echo(f"alert {firing_id} acknowledged")


@alert.group("channel")
def channel() -> None:
    """Where alerts go: a JSON webhook, Slack, email, or a local command."""


@channel.command("add")
@click.argument("name")
@click.option("--webhook", "webhook", metavar="URL", help="POST the alert as JSON to this URL.")
@click.option("--slack", "slack", metavar="URL", help="A Slack (or Mattermost, Rocket.Chat) incoming-webhook URL.")
@click.option("--email", "emails", metavar="ADDRESS", multiple=True, help="Mail the alert to this address (repeatable).")
@click.option("--smtp-host", help="With --email: the SMTP server [default: the server's [smtp] host, or localhost].")
@click.option("--smtp-port", type=click.IntRange(1, 65535), help="With --email: the SMTP port.")
@click.option("--command", "command", metavar="CMD", help="Run this program with the alert as JSON on stdin (no shell).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def channel_add(ctx: click.Context, name: str, webhook: str | None, slack: str | None, emails: tuple[str, ...],
                smtp_host: str | None, smtp_port: int | None, command: str | None, as_json: bool) -> None:
    """Create (or replace) a channel."""
    given = [kind for kind, value in (("webhook", webhook), ("slack", slack), ("email", emails), ("command", command))
             if value]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --webhook, --slack, --email or --command")
    kind = given[0]
    config: dict[str, Any] = {}
    if kind in ("webhook", "slack"):
        config["url"] = webhook or slack
    elif kind == "email":
        config["to"] = list(emails)
        config.update({k: v for k, v in (("smtp_host", smtp_host), ("smtp_port", smtp_port)) if v is not None})
    else:
        config["command"] = command  # split by the server, which names the field if the quotes do not balance
    if kind != "email" and (smtp_host or smtp_port):
        raise click.UsageError("--smtp-host and --smtp-port go with --email")
    saved = client_for(ctx).add_channel(name, kind, **config)
    click.echo(json_text(saved) if as_json else f"alert channel {saved['name']} ({saved['type']})")


@channel.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def channel_list(ctx: click.Context, as_json: bool) -> None:
    """The channels (URLs' secret paths hidden)."""
    from corral.cli.format_monitor import channels_table

    found = client_for(ctx).channels()
    click.echo(json_text(found) if as_json else channels_table(found))


@channel.command("share")
@click.argument("name")
@click.option("--with", "users", metavar="USER,USER", help="Share with these users (a comma-separated list).")
@click.option("--all", "everyone", is_flag=True, help="Share with every user.")
@click.option("--none", "nobody", is_flag=True, help="Share with nobody: admins only.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def channel_share(ctx: click.Context, name: str, users: str | None, everyone: bool, nobody: bool, as_json: bool) -> None:
    """Let users name a channel in their alert rules (admins only); each share replaces the last.

    A channel runs a program or posts to a URL as the server, with text a rule's owner writes:
    only the users it is shared with (and admins) may use it.
    """
    if sum((users is not None, everyone, nobody)) != 1:
        raise click.UsageError("give exactly one of --with USER,USER, --all or --none")
    names = [u.strip() for u in (users or "").split(",") if u.strip()]
    if users is not None and not names:
        raise click.UsageError("--with needs user names, e.g. --with alice,bob (or --none)")
    saved = client_for(ctx).share_channel(name, names, everyone=everyone)
    if as_json:
        print_json(saved)
        return
    from corral.cli.format_monitor import shared_with_text

    click.echo(f"alert channel {saved['name']}: shared with {shared_with_text(saved.get('shared_with') or [])}")


@channel.command("delete")
@click.argument("name")
@click.pass_context
def channel_delete(ctx: click.Context, name: str) -> None:
    """Delete a channel that no rule uses."""
    client_for(ctx).delete_channel(name)
    click.echo(f"alert channel {name} deleted")


@channel.command("test")
@click.argument("name")
@click.pass_context
def channel_test(ctx: click.Context, name: str) -> None:
    """Send a test notification now; fails with the reason if it does not get through."""
    client_for(ctx).test_channel(name)
    click.echo(f"test notification sent through {name}")


MONITORING_COMMANDS = (top, eff, diagnose, alert)
