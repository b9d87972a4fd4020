"""`corral update` (and scontrol update) of sbatch's when, where, mail, comment and dependency fields, on a live server."""

from __future__ import annotations

import socket
import time

import pytest

from corral.errors import Conflict, InvalidRequest
from tests.helpers import wait_for


def test_update_sets_and_clears_begin_deadline_nodes_mail_comment_and_time_min(server_factory, short_tmp):
    client = server_factory().client()
    job = client.submit(["true"], workdir=short_tmp, hold=True, time="30")
    node = socket.gethostname().split(".")[0]
    updated = client.update(job["id"], comment="new note", begin="now+1hour", deadline="now+3hours",
                            constraint="", nodelist=node, mail_type="END,FAIL",
                            mail_user="ana@example.org", time_min="10", name="renamed")
    assert (updated["comment"], updated["nodelist"], updated["mail_type"], updated["mail_user"]) == (
        "new note", [node], ["END", "FAIL"], "ana@example.org")
    assert (updated["time_min_s"], updated["name"]) == (600, "renamed")
    begin = time.mktime(time.strptime(updated["begin_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert abs(begin - (time.time() + 3600)) < 60  # now+1hour, read against the server's clock
    assert client.get(job["id"])["deadline"] == updated["deadline"]  # written through, not only answered
    cleared = client.update(job["id"], begin="", deadline="", comment="", nodelist="", mail_type="NONE",
                            time_min="")
    assert (cleared["begin_time"], cleared["deadline"], cleared["comment"], cleared["nodelist"]) == (None, None, None, [])
    assert (cleared["mail_type"], cleared["time_min_s"]) == ([], None)


def test_bad_updates_name_their_field_and_change_nothing(server_factory, short_tmp):
    client = server_factory().client()
    job = client.submit(["true"], workdir=short_tmp, hold=True, time="30")
    for change, field in [({"begin": "garbage"}, "begin"), ({"deadline": "2001-01-01"}, "deadline"),
                          ({"mail_type": "BOGUS"}, "mail_type"), ({"time_min": "99"}, "time_min"),
                          ({"nodelist": "bad[1-2]"}, "nodelist"), ({"dependency": "afterok:x"}, "dependency"),
                          ({"deadline": "now+10minutes"}, "deadline")]:
        with pytest.raises(InvalidRequest) as caught:
            client.update(job["id"], **change)
        assert caught.value.field == field, change
    with pytest.raises(InvalidRequest, match="time_min"):  # a limit below the job's --time-min
        client.update(client.update(job["id"], time_min="20")["id"], time="10")
    after = client.get(job["id"])
    assert (after["begin_time"], after["deadline"], after["mail_type"], after["time_limit_s"]) == (None, None, [], 1800)


def test_a_dependency_added_by_update_is_awaited_and_one_cleared_no_longer(server_factory, short_tmp):
    client = server_factory().client()
    first = client.submit(["sleep", "30"], workdir=short_tmp)
    job = client.submit(["true"], workdir=short_tmp, hold=True)
    client.update(job["id"], dependency=f"afterok:{first['id']}")
    client.release(job["id"])
    wait_for(lambda: client.get(job["id"])["reason"] == "Dependency")
    assert client.get(job["id"])["dependency"] == f"afterok:{first['id']}"
    client.update(job["id"], dependency="")
    assert client.wait(job["id"], timeout=30)["state"] == "COMPLETED"
    assert client.get(first["id"])["state"] == "RUNNING"  # it did not wait for the first one after all
    with pytest.raises(Conflict, match="only pending jobs"):
        client.update(first["id"], comment="too late")
    client.cancel(first["id"])
