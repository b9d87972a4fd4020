"""Small helpers shared by tests."""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import replace
from typing import Any

import pytest

from corral.core.jobspec.spec import JobSpec, build_spec


def make_spec(workdir: str = "/tmp", log_dir: str = "/tmp/corral-test-logs", **request: Any) -> JobSpec:
    """A spec built the way the server builds one, placed in the default partition and QoS."""
    request.setdefault("command", ["true"])
    spec = build_spec(request, user="tester", log_dir=log_dir, default_workdir=workdir, server_env=dict(os.environ))
    return replace(spec, partition=spec.partition or "default", qos=spec.qos or "normal")


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.05):
    """Poll until predicate() is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def alive(pid: int) -> bool:
    """Running: a zombie waits for its reaper (pid 1 here, which may take its time) and counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def needs(*modules: str) -> pytest.MarkDecorator:
    """Skip where an optional package (the dev extra's frameworks) is not installed, found without importing it:
    every xdist worker collects every file, and importing torch, Lightning or mlflow there costs each of them
    seconds for tests most of them never run."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (pip install -e '.[dev]')")
