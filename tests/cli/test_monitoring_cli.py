"""The monitoring commands (`corral top`, `eff`, `diagnose`, `alert ...`) against a live server, in-process."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from tests.helpers import wait_for


@pytest.fixture
def home(server_factory) -> str:
    return server_factory(gpus=2, extra=["--sample-interval", "0.3"]).home


def corral(home: str, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--home", home, *args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_top_shows_each_running_job_with_its_cpu_and_memory(home):
    corral(home, "submit", "-c", "1", "--wrap", f"{sys.executable} -c 'while True: pass'")
    wait_for(lambda: "%" in corral(home, "top", "--once").splitlines()[-1], timeout=20)
    line = corral(home, "top", "--once").splitlines()[-1]
    assert line.split()[0] == "1" and "of 1" in line  # CPU shown against the cores it asked for
    rows = json.loads(corral(home, "top", "--json"))
    assert rows[0]["sample"]["cpu_utilization"] > 30
    corral(home, "cancel", "1")
    wait_for(lambda: corral(home, "top", "--once").strip() == "no running jobs", timeout=20)


def test_eff_and_diagnose_print_reports(home):
    corral(home, "submit", "--mem", "4G", "--wrap", "echo 'corral: nothing here' >&2; exit 127")
    wait_for(lambda: "FAILED" in corral(home, "show", "1"), timeout=20)
    eff = corral(home, "eff", "1")
    assert "Job ID: 1" in eff and "Memory Efficiency" in eff and "CPU Efficiency" in eff
    report = json.loads(corral(home, "eff", "1", "--json"))
    assert report["mem_requested_mb"] == 4096 and "advice" in report
    diagnosis = corral(home, "diagnose", "1")
    assert "exit code 127" in diagnosis or "127" in diagnosis
    assert json.loads(corral(home, "diagnose", "1", "--json"))["findings"]
    assert "does not exist" in corral(home, "diagnose", "99", code=1)



def test_alert_commands_create_list_ack_and_explain_bad_input(home, http):
    assert "alert channel hook (webhook)" in corral(home, "alert", "channel", "add", "hook", "--webhook", http.base)
    assert "give exactly one of" in corral(home, "alert", "channel", "add", "x", code=2)
    bad = corral(home, "alert", "create", "x", "-c", "gpu_utilization < lots", code=1)
    assert "condition" in bad and "gpu_utilization < 10 for 15m" in bad  # names the field and the forms
    corral(home, "alert", "create", "failed", "-c", "state == FAILED", "-s", "critical", "--channel", "hook")
    assert "state == FAILED" in corral(home, "alert", "rules")
    corral(home, "submit", "--wrap", "exit 2")
    wait_for(lambda: http.requests, timeout=20)
    listed = wait_for(lambda: "hook:sent" in (out := corral(home, "alert", "list")) and out, timeout=20)
    assert "CRITICAL" in listed and "failed" in listed
    corral(home, "alert", "ack", "1")
    assert corral(home, "alert", "list").strip() == "no alerts"
    assert "ACK" in corral(home, "alert", "list", "--all")
    assert "test notification sent" in corral(home, "alert", "channel", "test", "hook")
    assert len(http.requests) == 2
    corral(home, "alert", "delete", "failed")
    corral(home, "alert", "channel", "delete", "hook")
    assert "no alert rules" in corral(home, "alert", "rules")


def test_recommend_needs_no_server():
    out = corral("/nonexistent-home", "recommend", "--params", "7B")
    assert "2×A100-80G" in out and "Adam" in out  # the answer, then its arithmetic


def test_the_readmes_smtp_section_against_a_relay_without_tls_fails_saying_why(server_factory, short_tmp, smtp_server):
    import os

    collector, port = smtp_server
    home = os.path.join(short_tmp, "mailhome")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsender = "corral@lab.org"\nstarttls = true\n'
                f'username = "corral"\npassword = "hunter2"\n')
    server = server_factory(gpus=0, home=home)
    corral(server.home, "alert", "channel", "add", "mail", "--email", "oncall@lab.org")
    out = corral(server.home, "alert", "channel", "test", "mail", code=1)
    assert f"127.0.0.1:{port} does not offer STARTTLS" in out and "starttls = false" in out
    assert collector.envelopes == []

    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsender = "corral@lab.org"\nstarttls = false\n')
    server.stop()
    server = server_factory(gpus=0, home=home)
    assert "test notification sent" in corral(server.home, "alert", "channel", "test", "mail")
    assert collector.envelopes[0].rcpt_tos == ["oncall@lab.org"]
