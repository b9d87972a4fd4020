"""The monitoring commands (`corral top`, `eff`, `diagnose`, `alert ...`) against a live server, in-process."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.executor.cgroups.placement import _mounts
from tests.helpers import wait_for

CGROUPS = os.geteuid() == 0 and ("memory" in _mounts("/proc/self/mountinfo")[0]
                                 or _mounts("/proc/self/mountinfo")[1] is not None)


@pytest.fixture
def home(server_factory) -> str:
    return server_factory(gpus=2, extra=["--sample-interval", "0.3"]).home


def _cpu_share(home: str) -> float | None:
    rows = json.loads(corral(home, "top", "--json"))
    return (rows[0].get("sample") or {}).get("cpu_utilization") if rows else None


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
    # a busy loop: its share shows once a whole sampling interval (0.3 s) of it is seen; the first interval
    # may hold its interpreter's start-up, or a moment the machine's two cores were busy elsewhere
    wait_for(lambda: (_cpu_share(home) or 0) > 30, timeout=20)
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



@pytest.mark.skipif(not CGROUPS, reason="a memory limit the kernel holds needs root and cgroups (CI has both)")
def test_diagnose_and_eff_state_the_same_peak_for_a_job_killed_for_memory(home):
    """The issue's job: the samples saw it small, then it allocated past --mem and was killed."""
    grow = f"{sys.executable} -c 'import time; time.sleep(1.5); a = bytearray(400 << 20); time.sleep(30)'"
    corral(home, "submit", "--mem", "100M", "-t", "1", "--wrap", grow)
    wait_for(lambda: "OUT_OF_MEMORY" in corral(home, "show", "1"), timeout=60)
    eff = json.loads(corral(home, "eff", "1", "--json"))
    diagnosis = json.loads(corral(home, "diagnose", "1", "--json"))
    peak = eff["max_rss_mb"]
    assert peak >= 90 and eff["memory_source"] == "cgroup"  # the kernel's count at the kill, not a sample
    assert diagnosis["usage"]["peak_rss_mb"] == peak and diagnosis["usage"]["memory_source"] == "cgroup"
    assert diagnosis["usage"]["samples"] >= 2  # it was sampled, small, before it grew
    eff_text, diagnose_text = corral(home, "eff", "1"), corral(home, "diagnose", "1")
    assert f"Memory Utilized: {peak:.1f} MB (peak, from the kernel's count for its cgroup" in eff_text
    quoted = re.findall(r"memory peaked at ([\d.]+) MB", diagnose_text)
    assert quoted == [f"{peak:.1f}"], diagnose_text


def test_declared_gpus_without_a_driver_say_so_and_an_idle_request_is_flagged(home):
    corral(home, "submit", "--gpus", "2", "--mem", "8G", "-c", "1", "-t", "1", "--wrap", "sleep 3")
    top = wait_for(lambda: "no driver" in (out := corral(home, "top", "--once")) and out, timeout=20)
    assert "0,1 no driver" in top and "?" not in top  # said once, not `0:? 1:?`
    wait_for(lambda: "COMPLETED" in corral(home, "show", "1"), timeout=30)
    text = corral(home, "diagnose", "1")
    assert "no problem found" not in text
    assert "(oversized_request)" in text and "it asked for 8.0 GB of host memory" in text
    assert "Not checked:" in text and "GPU use of its 2 GPUs: no GPU driver (NVML) answers where it ran" in text
    assert "GPU Utilization: - (no GPU samples: no GPU driver reads its GPUs)" in corral(home, "eff", "1")
    report = json.loads(corral(home, "diagnose", "1", "--json"))
    assert report["unchecked"] and report["findings"][0]["cause"] == "oversized_request"


def test_a_short_jobs_timeout_advice_fits_its_own_limit(home):
    corral(home, "submit", "-t", "0:20", "--wrap", "sleep 300")
    wait_for(lambda: "TIMEOUT" in corral(home, "show", "1"), timeout=120)
    text = corral(home, "diagnose", "1")
    assert "(timeout_no_checkpoint)" in text
    assert "USR1@120" not in text and "--signal USR1@2 sends SIGUSR1 2 s before it" in text


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
    assert "FIRED (ended job)" in listed and "RESOLVED" not in listed  # a failure, not an all-clear
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
