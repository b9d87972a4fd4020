"""A job's spec back as a request: built again by build_spec, it is the same job (as its owner)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from corral.core.jobspec.resubmit import CONFIRM_OWNER, check_owner_confirmed, parse_sets, request_of, with_changes
from corral.core.jobspec.spec import build_spec
from corral.errors import InvalidRequest


def _build(request, user="alice"):
    return build_spec(request, user=user, log_dir="/logs/alice", default_workdir="/home/alice", server_env={"PATH": "/bin"})


def test_a_spec_built_again_from_its_request_is_the_same_job():
    first = _build({"command": ["python", "train.py"], "gpus": "A100:2", "cpus": 4, "ntasks": 2, "mem": "16G",
                    "time": "2:00:00", "env": {"LR": "1"}, "labels": {"team": "vision"}, "workdir": "/tmp",
                    "nice": 5, "preemptible": True, "signal": "USR1@90", "exclude": "n1,n2", "comment": "hi",
                    "time_min": "30", "array": "0-3%2"})
    again = _build(request_of(first))
    assert again == first


def test_changes_replace_every_spelling_and_merge_env_and_labels():
    first = _build({"command": ["x"], "time": "1:00:00", "env": {"A": "1", "B": "2"}, "labels": {"k": "v"}})
    changed = _build(with_changes(request_of(first), {"time": "2h", "env": {"B": None, "C": "3"}, "gpus": 0}))
    assert changed.time_limit_s == 7200
    assert changed.env["A"] == "1" and "B" not in changed.env and changed.env["C"] == "3"
    assert changed.labels == {"k": "v"}
    script = _build(with_changes(request_of(first), {"script": "#!/bin/sh\necho hi\n"}))
    assert script.command == () and script.script is not None


def test_a_task_runs_again_alone_as_its_owner_with_the_owners_files():
    first = _build({"command": ["x"], "array": "0-9", "env": {"HOME": "/home/alice", "X": "1"}, "stdout": "/o/%j"})
    request = request_of(replace(first), task_id=3)
    assert request["array"] == "3"
    assert request["env"] == {"HOME": "/home/alice", "X": "1"} and request["stdout"] == "/o/%j"


def test_anyone_but_the_owner_must_name_the_owner_to_run_a_job_again():
    check_owner_confirmed("5", "alice", "alice", None)  # the owner's own rerun: nothing to confirm
    check_owner_confirmed("5", "alice", "alice", "alice")
    check_owner_confirmed("5", "alice", "root", "alice")
    for confirmed in (None, "bob", "", 7, ["alice"]):
        with pytest.raises(InvalidRequest) as exc:
            check_owner_confirmed("5", "alice", "root", confirmed)
        assert exc.value.field == CONFIRM_OWNER == "confirm_owner"
        assert '"confirm_owner": "alice"' in exc.value.hint
    with pytest.raises(InvalidRequest):
        check_owner_confirmed("5", "alice", "alice", "bob")  # a wrong name is wrong for the owner too


def test_an_interactive_job_cannot_run_again():
    with pytest.raises(InvalidRequest):
        request_of(replace(_build({"command": ["bash"]}), interactive="pty"))


def test_sets_name_request_fields_and_env_and_label_entries():
    assert parse_sets(["time=2h", "env.LR=3e-4", "label.try=2", "gpu-type=A100"]) == {
        "time": "2h", "env": {"LR": "3e-4"}, "labels": {"try": "2"}, "gpu_type": "A100"}
    for bad in ("time", "bogus=1", "=1"):
        with pytest.raises(InvalidRequest) as exc:
            parse_sets([bad])
        assert exc.value.field == "set"
