"""Alert channels against real receivers: an HTTP server, an SMTP server and real processes."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from corral.errors import InvalidRequest
from corral.monitor.channels import (
    CHANNEL_TYPES,
    MAX_ATTEMPTS,
    Channel,
    DeliveryError,
    Notification,
    SmtpSettings,
    deliver,
    parse_channel,
    retry_delay_s,
    summary_line,
)
from tests.helpers import wait_for
from tests.monitor.receivers import HttpReceiver, MailCollector, free_port, start_smtp

SLACK_PATH = "/services/T0001/B0002/XsecretTOKENx"

NOTE = Notification(
    firing_id=7, rule="job-failed", severity="critical", status="firing", condition="state == FAILED",
    message="exited with code 1 after 3h", job_id=12, job_name="train", user="alice", value=1.0,
    fired_at=1_700_000_000.0, resolved_at=None,
)




def email_channel(port: int, **extra: Any) -> Channel:
    return parse_channel({"name": "mail", "type": "email", "to": ["oncall@example.com", "bob@example.com"],
                          "smtp_host": "127.0.0.1", "smtp_port": port, **extra})


# --- webhook and Slack -----------------------------------------------------------------------


def test_webhook_posts_every_field_of_the_notification_as_json(http: HttpReceiver) -> None:
    channel = parse_channel({"name": "hook", "type": "webhook", "url": f"{http.base}/alerts",
                             "headers": {"Authorization": "Bearer abc", "X-Team": "ml"}})
    deliver(channel, NOTE, timeout_s=5)

    [request] = http.requests
    assert request["path"] == "/alerts"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["headers"]["User-Agent"] == "corral"
    assert request["headers"]["Authorization"] == "Bearer abc"
    assert request["headers"]["X-Team"] == "ml"
    body = json.loads(request["body"])
    for field in ("firing_id", "rule", "severity", "status", "condition", "message", "job_id", "job_name",
                  "user", "value", "fired_at", "resolved_at"):
        assert body[field] == getattr(NOTE, field), field
    assert body["fired_at_iso"] == "2023-11-14T22:13:20Z"
    assert body["resolved_at_iso"] is None
    assert body["summary"] == summary_line(NOTE)


def test_webhook_sends_a_nan_value_as_strict_json(http: HttpReceiver) -> None:
    channel = parse_channel({"name": "hook", "type": "webhook", "url": http.base})
    resolved = replace(NOTE, rule="loss-nan", value=math.nan, status="resolved", resolved_at=1_700_000_060.0)
    deliver(channel, resolved, timeout_s=5)

    body = json.loads(http.requests[0]["body"], parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert body["value"] == "NaN"
    assert body["status"] == "resolved"
    assert body["resolved_at_iso"] == "2023-11-14T22:14:20Z"


def test_slack_body_has_text_and_blocks_with_the_facts(http: HttpReceiver) -> None:
    channel = parse_channel({"name": "chat", "type": "slack", "url": http.base + SLACK_PATH})
    deliver(channel, replace(NOTE, message="loss <b> & more", value=0.123456789), timeout_s=5)

    [request] = http.requests
    assert request["path"] == SLACK_PATH
    body = json.loads(request["body"])
    assert body["text"] == "[CRITICAL] job 12 (train) job-failed: loss &lt;b&gt; &amp; more"
    blocks = body["blocks"]
    assert blocks[0] == {"type": "section", "text": {"type": "mrkdwn", "text": body["text"]}}
    fields = [f["text"] for f in blocks[1]["fields"]]
    assert "*Job*\n12 (train)" in fields
    assert "*Severity*\ncritical" in fields
    assert "*Value*\n0.123457" in fields
    assert "*Fired*\n2023-11-14T22:13:20Z" in fields
    assert blocks[2]["type"] == "context"


def test_http_error_status_names_the_code_and_the_body_but_not_the_secret_path(http: HttpReceiver) -> None:
    http.status, http.answer = 500, f"no_service for {SLACK_PATH}: try later".encode() + b"x" * 1000
    channel = parse_channel({"name": "chat", "type": "slack", "url": http.base + SLACK_PATH})
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, NOTE, timeout_s=5)

    message = caught.value.message
    assert "'chat'" in message and "HTTP 500" in message and "no_service" in message
    assert "127.0.0.1" in message
    assert "secretTOKEN" not in message and "T0001" not in message
    assert len(message) < 400  # the first 200 bytes of the body, not all of it


def test_a_redirect_is_a_failure_not_a_second_post(http: HttpReceiver) -> None:
    http.status = 307
    channel = parse_channel({"name": "hook", "type": "webhook", "url": http.base})
    with pytest.raises(DeliveryError, match="HTTP 307"):
        deliver(channel, NOTE, timeout_s=5)
    assert len(http.requests) == 1


def test_connection_refused_names_the_host_and_not_the_path() -> None:
    port = free_port()  # closed again: nothing listens there
    channel = parse_channel({"name": "chat", "type": "slack", "url": f"http://127.0.0.1:{port}{SLACK_PATH}"})
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, NOTE, timeout_s=5)

    assert f"127.0.0.1:{port}" in caught.value.message
    assert "refused" in caught.value.message
    assert "secretTOKEN" not in caught.value.message and "services" not in caught.value.message


def test_a_server_that_never_answers_times_out_within_the_limit() -> None:
    with socket.socket() as silent:  # listens, so connecting works, but never accepts or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        channel = parse_channel({"name": "chat", "type": "slack", "url": f"http://127.0.0.1:{port}{SLACK_PATH}"})
        started = time.monotonic()
        with pytest.raises(DeliveryError) as caught:
            deliver(channel, NOTE, timeout_s=0.5)
        elapsed = time.monotonic() - started

    assert elapsed < 3
    assert "no answer within 0.5 s" in caught.value.message
    assert f"127.0.0.1:{port}" in caught.value.message
    assert "secretTOKEN" not in caught.value.message


# --- email -----------------------------------------------------------------------------------


def test_email_reaches_every_recipient_with_the_summary_as_subject(smtp_server) -> None:
    collector, port = smtp_server
    deliver(email_channel(port), NOTE, SmtpSettings(sender="corral@gpu.example"), timeout_s=5)

    [envelope] = collector.envelopes
    assert envelope.mail_from == "corral@gpu.example"
    assert envelope.rcpt_tos == ["oncall@example.com", "bob@example.com"]
    message = collector.message()
    assert message["Subject"] == "[CRITICAL] job 12 (train) job-failed: exited with code 1 after 3h"
    assert message["From"] == "corral@gpu.example"
    assert message["To"] == "oncall@example.com, bob@example.com"
    body = message.get_content()
    for text in ("exited with code 1 after 3h", "state == FAILED", "job-failed", "critical", "firing",
                 "12 (train)", "alice", "2023-11-14T22:13:20Z", "Firing:      7"):
        assert text in body, text


def test_a_channel_sender_overrides_the_servers(smtp_server) -> None:
    collector, port = smtp_server
    deliver(email_channel(port, sender="alerts@lab.example"), NOTE, SmtpSettings(), timeout_s=5)
    assert collector.envelopes[0].mail_from == "alerts@lab.example"
    assert collector.message()["From"] == "alerts@lab.example"


def test_a_refused_recipient_is_a_delivery_error_naming_it(smtp_server) -> None:
    collector, port = smtp_server
    channel = parse_channel({"name": "mail", "type": "email", "to": "ghost@nowhere.test",
                             "smtp_host": "127.0.0.1", "smtp_port": port})
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, NOTE, timeout_s=5)
    assert "ghost@nowhere.test" in caught.value.message and "550" in caught.value.message
    assert collector.envelopes == []


def test_one_refused_recipient_does_not_fail_the_others(smtp_server, caplog) -> None:
    collector, port = smtp_server
    channel = parse_channel({"name": "mail", "type": "email", "to": ["ok@example.com", "ghost@nowhere.test"],
                             "smtp_host": "127.0.0.1", "smtp_port": port})
    with caplog.at_level(logging.WARNING, logger="corral.monitor"):
        deliver(channel, NOTE, timeout_s=5)  # raising would resend to ok@ on every retry
    assert collector.envelopes[0].rcpt_tos == ["ok@example.com"]
    assert "ghost@nowhere.test" in caplog.text


def test_a_relay_that_cannot_log_in_is_a_delivery_error(smtp_server) -> None:
    _, port = smtp_server  # offers no AUTH
    to_me = parse_channel({"name": "mail", "type": "email", "to": "oncall@example.com"})
    relay = SmtpSettings(host="127.0.0.1", port=port, username="corral", password="hunter2")
    with pytest.raises(DeliveryError, match="AUTH"):
        deliver(to_me, NOTE, relay, timeout_s=5)


def test_starttls_against_a_relay_without_tls_says_so_and_how_to_fix_it(smtp_server) -> None:
    collector, port = smtp_server  # aiosmtpd without a TLS context: it offers no STARTTLS
    to_me = parse_channel({"name": "mail", "type": "email", "to": "oncall@example.com"})
    relay = SmtpSettings(host="127.0.0.1", port=port, starttls=True, username="corral", password="hunter2")
    with pytest.raises(DeliveryError) as caught:
        deliver(to_me, NOTE, relay, timeout_s=5)
    message = caught.value.message
    assert f"the mail server 127.0.0.1:{port} does not offer STARTTLS" in message
    assert "set starttls = false in the [smtp] section" in message
    assert "hunter2" not in message
    assert collector.envelopes == [] and collector.logins == []  # nothing sent, no password offered in clear


def test_no_mail_server_is_a_delivery_error() -> None:
    port = free_port()
    with pytest.raises(DeliveryError) as caught:
        deliver(email_channel(port), NOTE, timeout_s=5)
    assert f"127.0.0.1:{port}" in caught.value.message and "refused" in caught.value.message


def test_the_servers_credentials_log_in_to_its_own_relay_only() -> None:
    collector = MailCollector()
    controller = start_smtp(collector, authenticator=collector.authenticate, auth_require_tls=False)
    try:
        to_me = parse_channel({"name": "mail", "type": "email", "to": "oncall@example.com"})
        relay = SmtpSettings(host="127.0.0.1", port=controller.port, username="corral", password="hunter2")
        deliver(to_me, NOTE, relay, timeout_s=5)
        assert collector.logins == [("corral", "hunter2")]
        assert len(collector.envelopes) == 1

        # A channel naming another server never sees the relay's password.
        elsewhere = SmtpSettings(host="smtp.example.com", port=587, username="corral", password="hunter2")
        deliver(email_channel(controller.port), NOTE, elsewhere, timeout_s=5)
        assert collector.logins == [("corral", "hunter2")]  # still only the first
        assert len(collector.envelopes) == 2
    finally:
        controller.stop()


# --- command ---------------------------------------------------------------------------------

RECORD = """
import json, os, sys
out = {"stdin": sys.stdin.read(), "env": {k: v for k, v in os.environ.items() if k.startswith("CORRAL_ALERT_")},
       "args": sys.argv[1:]}
open(sys.argv[1], "w").write(json.dumps(out))
"""


def test_command_gets_the_payload_on_stdin_and_the_alert_in_its_environment(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    channel = parse_channel({"name": "pager", "type": "command", "argv": [sys.executable, "-c", RECORD, str(record)]})
    deliver(channel, replace(NOTE, value=math.inf), timeout_s=10)

    seen = json.loads(record.read_text())
    assert json.loads(seen["stdin"]) == {**NOTE.payload(), "value": "Infinity"}
    assert seen["env"]["CORRAL_ALERT_RULE"] == "job-failed"
    assert seen["env"]["CORRAL_ALERT_SEVERITY"] == "critical"
    assert seen["env"]["CORRAL_ALERT_STATUS"] == "firing"
    assert seen["env"]["CORRAL_ALERT_JOB_ID"] == "12"
    assert seen["env"]["CORRAL_ALERT_MESSAGE"] == "exited with code 1 after 3h"
    assert seen["env"]["CORRAL_ALERT_VALUE"] == "Infinity"


def test_a_command_string_is_split_into_arguments_not_given_to_a_shell(tmp_path: Path) -> None:
    record = tmp_path / "it's here.json"
    script = RECORD.replace('"', "'")
    command = f'{sys.executable} -c "{script}" "{record}" "$HOME; touch pwned"'
    channel = parse_channel({"name": "pager", "type": "command", "command": command})
    assert channel.config["argv"][0] == sys.executable
    deliver(channel, NOTE, timeout_s=10)

    seen = json.loads(record.read_text())
    assert seen["args"] == [str(record), "$HOME; touch pwned"]


def test_a_failing_command_reports_its_exit_code_and_the_end_of_stderr() -> None:
    script = "import sys; sys.stderr.write('x' * 500 + ' pager quota exceeded'); sys.exit(3)"
    channel = parse_channel({"name": "pager", "type": "command", "argv": [sys.executable, "-c", script]})
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, NOTE, timeout_s=10)
    message = caught.value.message
    assert "'pager'" in message and "exited with code 3" in message
    assert message.endswith("pager quota exceeded")
    assert "x" * 250 not in message  # the last 200 bytes only


def test_a_missing_program_is_named() -> None:
    channel = parse_channel({"name": "pager", "type": "command", "argv": ["/opt/nowhere/page-oncall", "--now"]})
    with pytest.raises(DeliveryError, match="no program '/opt/nowhere/page-oncall'"):
        deliver(channel, NOTE)


def test_a_command_that_overruns_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    channel = parse_channel({"name": "pager", "type": "command", "argv": [sys.executable, "-c", script]})
    started = time.monotonic()
    # 3 s: time for an interpreter to start and spawn its child on a loaded machine, before the kill comes
    with pytest.raises(DeliveryError, match="did not finish within 3 s"):
        deliver(channel, NOTE, timeout_s=3)
    assert time.monotonic() - started < 10  # killed at the limit, not left to its 60 s

    child = int(pid_file.read_text())
    wait_for(lambda: not _running(child), timeout=15)


def test_a_finished_command_is_not_held_up_by_a_helper_it_left_running(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    script = ("import subprocess, sys\n"
              "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(helper.pid))\n")
    channel = parse_channel({"name": "pager", "type": "command", "argv": [sys.executable, "-c", script]})
    started = time.monotonic()
    try:
        deliver(channel, NOTE, timeout_s=30)  # held up, it would end at this limit, as a DeliveryError
        # far sooner than the helper's 60 s, however long the interpreters take to start on a loaded machine
        assert time.monotonic() - started < 15
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has already ended


# --- checking definitions --------------------------------------------------------------------


@pytest.mark.parametrize("body, field", [
    ({"name": "a", "type": "pigeon", "url": "https://x.example"}, "type"),
    ({"name": "a", "url": "https://x.example"}, "type"),
    ({"name": "a", "type": "webhook", "url": "ftp://x.example/hook"}, "url"),
    ({"name": "a", "type": "webhook", "url": "file:///etc/passwd"}, "url"),
    ({"name": "a", "type": "webhook", "url": "https:///no-host"}, "url"),
    ({"name": "a", "type": "webhook", "url": "https://user:pw@x.example/"}, "url"),
    ({"name": "a", "type": "webhook"}, "url"),
    ({"name": "a", "type": "webhook", "url": "https://x.example", "headers": {"X-A": "1\r\nX-Evil: 2"}}, "headers.X-A"),
    ({"name": "a", "type": "webhook", "url": "https://x.example", "headers": {"Bad Name": "1"}}, "headers"),
    ({"name": "a", "type": "slack", "url": "https://x.example", "headers": {}}, "headers"),
    ({"name": "a", "type": "email", "to": "a@b\nBcc: everyone@corp.example"}, "to"),
    ({"name": "a", "type": "email", "to": ["ok@b.example", "a@b.example, c@d.example"]}, "to[1]"),
    ({"name": "a", "type": "email", "to": "no-at-sign"}, "to"),
    ({"name": "a", "type": "email", "to": []}, "to"),
    ({"name": "a", "type": "email", "to": "a@b", "sender": "me@x\r\nSubject: hi"}, "sender"),
    ({"name": "a", "type": "email", "to": "a@b", "smtp_port": "25"}, "smtp_port"),
    ({"name": "a", "type": "email", "to": "a@b", "smtp_host": "mail host"}, "smtp_host"),
    ({"name": "a", "type": "email", "to": "a@b", "cc": "c@d"}, "cc"),
    ({"name": "bad name!", "type": "slack", "url": "https://x.example"}, "name"),
    ({"name": "x" * 65, "type": "slack", "url": "https://x.example"}, "name"),
    ({"type": "slack", "url": "https://x.example"}, "name"),
    ({"name": "a", "type": "command", "argv": []}, "argv"),
    ({"name": "a", "type": "command", "argv": ["", "x"]}, "argv[0]"),
    ({"name": "a", "type": "command", "argv": ["prog", 3]}, "argv[1]"),
    ({"name": "a", "type": "command", "command": "prog 'unbalanced"}, "command"),
    ({"name": "a", "type": "command", "command": "   "}, "command"),
    ({"name": "a", "type": "command", "command": "prog", "argv": ["prog"]}, "command"),
    ({"name": "a", "type": "command"}, "argv"),
])
def test_a_bad_definition_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_channel(body)
    assert caught.value.field == field


def test_a_bad_url_error_does_not_echo_the_url() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_channel({"name": "a", "type": "slack", "url": "ftp://hooks.example/services/SECRET"})
    assert "SECRET" not in caught.value.message and "ftp" in caught.value.message


def test_a_definition_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_channel(["webhook"])
    assert caught.value.field == "body"


def test_config_is_normalized_and_round_trips() -> None:
    email = parse_channel({"name": "ops.mail", "type": "email", "to": "a@b.example", "smtp_port": 587})
    assert email.config == {"to": ["a@b.example"], "smtp_port": 587}
    command = parse_channel({"name": "page_1", "type": "command", "command": "/usr/bin/page --team 'ml infra'"})
    assert command.config == {"argv": ["/usr/bin/page", "--team", "ml infra"]}
    hook = parse_channel({"name": "hook", "type": "webhook", "url": "https://x.example/h"})
    assert hook.config == {"url": "https://x.example/h", "headers": {}}
    for channel in (email, command, hook):
        assert parse_channel({"name": channel.name, "type": channel.type, **channel.config}) == channel
    assert {c.type for c in (email, command, hook)} < set(CHANNEL_TYPES)


# --- retries and the summary -----------------------------------------------------------------


def test_retry_delays_double_from_five_seconds_and_give_up_after_the_last_attempt() -> None:
    delays = [retry_delay_s(n) for n in range(1, MAX_ATTEMPTS)]
    assert delays == [5, 10, 20, 40, 80, 160, 320]
    assert MAX_ATTEMPTS == 8
    assert retry_delay_s(MAX_ATTEMPTS) is None
    assert retry_delay_s(MAX_ATTEMPTS + 5) is None
    with pytest.raises(ValueError):
        retry_delay_s(0)


def test_summary_line_is_one_line_for_firing_and_resolved() -> None:
    assert summary_line(NOTE) == "[CRITICAL] job 12 (train) job-failed: exited with code 1 after 3h"
    resolved = replace(NOTE, status="resolved", resolved_at=NOTE.fired_at + 60)
    assert summary_line(resolved).startswith("[RESOLVED] job 12 (train) job-failed: ")
    no_job = replace(NOTE, job_id=None, job_name=None, severity="warning", message="disk\nalmost\r\nfull")
    assert summary_line(no_job) == "[WARNING] job-failed: disk almost full"
    long = summary_line(replace(NOTE, message="word " * 100))
    assert len(long) <= 200 and long.endswith("…")


def test_environment_is_not_polluted_by_delivery(tmp_path: Path) -> None:
    # The alert variables go to the child only; the server's own environment stays as it was.
    channel = parse_channel({"name": "pager", "type": "command", "argv": [sys.executable, "-c", "pass"]})
    deliver(channel, NOTE, timeout_s=10)
    assert not any(key.startswith("CORRAL_ALERT_") for key in os.environ)


def test_an_unexpected_error_in_a_sender_is_a_delivery_error_that_keeps_the_url_secret(monkeypatch) -> None:
    import corral.monitor.channels as channels

    def explode(*_: Any) -> None:
        raise ValueError(f"bad thing at https://hooks.slack.com{SLACK_PATH}")

    monkeypatch.setitem(channels._SENDERS, "slack", explode)
    channel = parse_channel({"name": "s", "type": "slack", "url": f"https://hooks.slack.com{SLACK_PATH}"})
    with pytest.raises(DeliveryError) as caught:
        deliver(channel, NOTE)
    assert "ValueError" in caught.value.message and SLACK_PATH not in caught.value.message
