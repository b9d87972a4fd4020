"""Hostile values in a job's name, environment, labels, log paths and working directory are data,
never shell code: the usual injection payloads run nothing and arrive in the job unchanged."""

from __future__ import annotations

import json
import sys

import pytest

from corral.errors import InvalidRequest

PAYLOADS = ["$(touch {m})", "`touch {m}`", "; touch {m}", "| touch {m}", "&& touch {m}", "\n touch {m}",
            "'; touch {m}; '", '"; touch {m}; "', "${{IFS}}touch${{IFS}}{m}"]
SHOW = "import json, os; print(json.dumps({'env': os.environ['HOSTILE'], 'name': os.environ['CORRAL_JOB_NAME']}))"


def test_injection_payloads_run_nothing_and_reach_the_job_verbatim(server_factory, tmp_path):
    client = server_factory().client()
    for i, template in enumerate(PAYLOADS):
        marker = tmp_path / f"pwned{i}"
        payload = template.format(m=marker)
        workdir = tmp_path / f"work dir {i}; $(touch x)"
        workdir.mkdir()
        request = dict(env={"HOSTILE": payload}, workdir=str(workdir),
                       stdout=str(tmp_path / f"out $(touch y{i}) %j.log"))
        if "\n" in payload:  # a name or label with a newline is refused, naming the field; nothing is stored
            with pytest.raises(InvalidRequest) as refused:
                client.submit([sys.executable, "-c", SHOW], name=payload, **request)
            assert refused.value.field == "name"
            name, labels = "plain", {}
        else:
            name, labels = payload, {"note": payload}
        job = client.submit([sys.executable, "-c", SHOW], name=name, labels=labels, **request)
        ended = client.wait(job["id"], timeout=30)
        assert ended["state"] == "COMPLETED", (payload, ended)
        assert json.loads(client.logs(job["id"])[0]) == {"env": payload, "name": name}, payload
        assert ended["labels"] == labels and ended["name"] == name
        assert not marker.exists() and not (workdir / "x").exists() and not (tmp_path / f"y{i}").exists(), payload
