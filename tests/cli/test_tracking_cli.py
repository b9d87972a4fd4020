"""The tracking commands (`corral runs`, `run show`, `metrics`, `compare`, `sync`, `import-tensorboard`)
against a live server, in-process with click's CliRunner.

One server per database for the whole module: the runs are made once (with the Client, metrics in the
JSON-list form) and the tests only read them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from tests.conftest import DATABASES, PG_ADMIN_URL, Server

STEPS = 1000
SPIKE_STEP = 500


@dataclass
class Tracked:
    server: Server
    ids: dict[str, int]

    def invoke(self, *args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", self.server.home, *args])

    def ok(self, *args: str) -> str:
        result = self.invoke(*args)
        assert result.exit_code == 0, result.output
        return result.output


def _log(client: Any, run_id: int, series: dict[str, list[Any]]) -> None:
    batch = {"batch_id": uuid.uuid4().hex, "metrics": [
        {"key": key, "steps": list(range(len(values))), "values": values} for key, values in series.items()]}
    assert client.log_metrics(run_id, batch)["accepted"] == sum(len(v) for v in series.values())


def _populate(server: Server) -> dict[str, int]:
    client = server.client()
    job = client.wait(client.submit(["true"], name="train", gpus=1)["id"], timeout=30)
    ids = {}
    a = client.create_run(project="mnist", name="lr-0.1", tags=["baseline"], job_id=job["id"],
                          config={"lr": 0.1, "batch": 64, "model": {"depth": 4, "act": "gelu"}})
    loss_a = [1 / (i + 1) + 0.05 for i in range(STEPS)]
    loss_a[SPIKE_STEP] = 50.0  # a spike that downsampling must keep
    _log(client, a["id"], {"loss": loss_a, "acc": [0.9 * i / (STEPS - 1) for i in range(STEPS)]})
    client.log_artifacts(a["id"], [
        {"path": f"/ckpt/a-{step}.pt", "type": "checkpoint", "size": 4096, "step": step, "metric": "val_loss",
         "metric_value": value} for step, value in ((300, 0.5), (600, 0.2), (900, 0.3))])
    client.finish_run(a["id"], "finished")
    ids["a"] = a["id"]

    b = client.create_run(project="mnist", name="lr-0.01",
                          config={"lr": 0.01, "batch": 64, "model": {"depth": 6, "act": "gelu"}})
    _log(client, b["id"], {"loss": [1 / (i + 1) + 0.2 for i in range(STEPS)],
                           "acc": [0.95 * i / (STEPS - 1) for i in range(STEPS)]})
    client.finish_run(b["id"], "finished")
    ids["b"] = b["id"]

    c = client.create_run(project="mnist", name="diverged", uid="diverged-run-1",
                          config={"lr": 1.0, "batch": 64, "model": {"depth": 4, "act": "gelu"}})
    _log(client, c["id"], {"loss": [2.0, 3.0, "NaN"]})
    client.finish_run(c["id"], "crashed")
    ids["c"] = c["id"]

    d = client.create_run(project="other", name="elsewhere", config={"lr": 0.1})
    ids["d"] = d["id"]
    ids["job"] = job["id"]
    client.close()
    return ids


@pytest.fixture(scope="module", params=DATABASES)
def tracked(request: pytest.FixtureRequest) -> Iterator[Tracked]:
    home = tempfile.mkdtemp(prefix="corral-")
    db, schema = None, None
    if request.param == "postgresql":
        import psycopg

        schema = f"corral_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        db = f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    server = Server(home=os.path.join(home, "home"), db=db).start()
    try:
        yield Tracked(server, _populate(server))
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
        if schema:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()[1:]]


def test_runs_lists_newest_first_with_shared_metrics_and_filters(tracked):
    ids = tracked.ids
    output = tracked.ok("runs", "--project", "mnist")
    header = output.splitlines()[0].split()
    assert header[:6] == ["ID", "PROJECT", "NAME", "STATE", "JOB", "STEP"]
    assert header[6:] == ["loss", "START", "DURATION"]  # acc is not in every shown run
    rows = _rows(output)
    assert [r[0] for r in rows] == [str(ids["c"]), str(ids["b"]), str(ids["a"])]
    assert rows[0][2:7] == ["diverged", "crashed", "-", "2", "nan"]
    assert rows[2][2:6] == ["lr-0.1", "finished", str(ids["job"]), str(STEPS - 1)]

    two = tracked.ok("runs", "-p", "mnist", "--state", "finished")
    assert two.splitlines()[0].split()[6:9] == ["acc", "loss", "START"]

    def listed(*args: str) -> list[str]:
        return [r[0] for r in _rows(tracked.ok("runs", *args))]

    assert listed("--where", "config.lr=0.1") == [str(ids["d"]), str(ids["a"])]
    assert listed("-p", "mnist", "--where", "config.model.depth>=6") == [str(ids["b"])]
    assert listed("--where", "metric.loss.min<0.1") == [str(ids["a"])]
    assert listed("--where", "config.lr<1", "--where", "metric.acc.last>0.92") == [str(ids["b"])]
    assert listed("--tag", "baseline") == [str(ids["a"])]
    assert listed("--state", "CRASHED") == [str(ids["c"])]
    assert listed("--job", str(ids["job"])) == [str(ids["a"])]
    assert listed("--limit", "1") == [str(ids["d"])]
    assert listed("-p", "nope") == []

    found = json.loads(tracked.ok("runs", "--project", "other", "--json"))
    assert [(r["id"], r["name"], r["state"]) for r in found] == [(ids["d"], "elsewhere", "running")]


def test_a_bad_where_is_one_line_naming_it(tracked):
    result = tracked.invoke("runs", "--where", "config.lr~0.1")
    assert result.exit_code == 1
    assert result.output.startswith("corral: error: ") and result.output.count("\n") == 1
    assert "where" in result.output


def test_run_show_has_where_it_ran_config_metrics_and_the_best_and_latest_checkpoint(tracked):
    ids = tracked.ids
    output = tracked.ok("run", "show", str(ids["a"]))
    for expected in (f"RunId: {ids['a']}", "Project: mnist", "Name: lr-0.1", "State: finished",
                     f"JobId: {ids['job']}", "GPU: A100", "Tags: baseline", "model.depth: 4", "model.act: gelu",
                     "lr: 0.1"):
        assert expected in output, expected
    loss = next(line.split() for line in output.splitlines() if line.split()[:1] == ["loss"])
    assert loss[:3] == ["loss", str(STEPS), f"0-{STEPS - 1}"]
    assert loss[-2:] == ["50", f"({SPIKE_STEP})"]  # max (step)
    checkpoints = {line.split()[-1]: line for line in output.splitlines() if line.strip().startswith("checkpoint")}
    assert set(checkpoints) == {"/ckpt/a-300.pt", "/ckpt/a-600.pt", "/ckpt/a-900.pt"}
    assert "best" in checkpoints["/ckpt/a-600.pt"] and "latest" in checkpoints["/ckpt/a-900.pt"]
    assert "best" not in checkpoints["/ckpt/a-300.pt"] and "latest" not in checkpoints["/ckpt/a-300.pt"]

    by_uid = json.loads(tracked.ok("run", "show", "diverged-run-1", "--json"))
    assert by_uid["id"] == ids["c"] and by_uid["state"] == "crashed" and by_uid["artifacts"] == []
    assert by_uid["metrics"]["loss"]["last"] == "NaN"


def test_metrics_downsamples_past_max_points_and_keeps_the_spike(tracked):
    run_id = str(tracked.ids["a"])
    output = tracked.ok("metrics", run_id, "loss", "--max-points", "10")
    lines = output.splitlines()
    rows = _rows("\n".join(lines[1:]))
    assert 2 < len(rows) <= 10  # at most max_points: a bucket's min and max may be one point
    assert lines[0].startswith(f"loss: {len(rows)} of {STEPS} points (downsampled")
    steps = [int(r[0]) for r in rows]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == STEPS - 1
    assert [SPIKE_STEP, "50"] == [int(rows[steps.index(SPIKE_STEP)][0]), rows[steps.index(SPIKE_STEP)][1]]

    full = tracked.ok("metrics", run_id, "acc").splitlines()
    assert full[0] == f"acc: {STEPS} points (all)" and len(full) == STEPS + 2

    window = json.loads(tracked.ok("metrics", run_id, "loss", "--start", "100", "--end", "109", "--json"))
    assert window["steps"] == list(range(100, 110)) and window["downsampled"] is False

    result = tracked.invoke("metrics", run_id, "loss", "--max-points", "10", "--csv")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "step,value,time"
    assert len(result.stdout.splitlines()) == len(rows) + 1 and "downsampled" in result.stderr
    first = result.stdout.splitlines()[1].split(",")
    assert first[0] == "0" and math.isclose(float(first[1]), 1.05) and float(first[2]) > 0

    nan = tracked.ok("metrics", str(tracked.ids["c"]), "loss")
    assert _rows("\n".join(nan.splitlines()[1:]))[-1] == ["2", "nan"]


def test_compare_shows_only_differing_config_and_marks_the_best_run(tracked):
    ids = tracked.ids
    output = tracked.ok("compare", str(ids["a"]), str(ids["b"]))
    config, metrics = output.split("\n\n")
    assert config.splitlines()[0].split() == ["CONFIG", str(ids["a"]), "lr-0.1", str(ids["b"]), "lr-0.01"]
    assert sorted(line.split()[0] for line in config.splitlines()[1:]) == ["lr", "model.depth"]
    lines = metrics.splitlines()
    loss = next(i for i, line in enumerate(lines) if line.startswith("loss"))
    assert f"{ids['a']} lr-0.1 (lower is better)" in lines[loss]
    assert lines[loss + 1].split()[:3] == ["min", "0.051", "*"]
    acc = next(i for i, line in enumerate(lines) if line.startswith("acc"))
    assert f"{ids['b']} lr-0.01 (higher is better)" in lines[acc]
    assert lines[acc + 2].split() == ["max", "0.9", "0.95", "*"]

    every = tracked.ok("compare", str(ids["a"]), str(ids["b"]), "--all").split("\n\n")[0]
    assert {line.split()[0] for line in every.splitlines()[1:]} == {"batch", "lr", "model.act", "model.depth"}

    data = json.loads(tracked.ok("compare", str(ids["a"]), str(ids["b"]), "diverged-run-1", "--json"))
    assert data["config"] == {"lr": [0.1, 0.01, 1.0], "model.depth": [4, 6, 4]}
    assert list(data["metrics"]) == ["loss"] and data["metrics"]["loss"]["best"] == [ids["a"]]


def test_an_unknown_run_is_one_line_naming_it_and_exit_status_1(tracked):
    for args in (("run", "show", "no-such-run"), ("run", "show", "987654"), ("metrics", "no-such-run", "loss"),
                 ("compare", str(tracked.ids["a"]), "no-such-run")):
        result = tracked.invoke(*args)
        assert result.exit_code == 1, args
        assert result.output.startswith("corral: error: ") and result.output.count("\n") == 1, result.output
        assert ("987654" if "987654" in args else "no-such-run") in result.output, result.output
    missing_key = tracked.invoke("metrics", str(tracked.ids["a"]), "val_bleu")
    assert missing_key.exit_code == 1 and "val_bleu" in missing_key.output and "acc, loss" in missing_key.output
    bad = tracked.invoke("run", "show", "not/a/ref")
    assert bad.exit_code == 1 and "not/a/ref" in bad.output


# -- sync and import-tensorboard: the commands' wiring, with the SDK's functions stood in for ---------


@dataclass
class FakeReport:
    uid: str
    run_id: int | None
    batches: int
    points: int
    state: str | None
    error: str | None


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **functions: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    module = types.ModuleType(name)
    for fn_name, result in functions.items():
        def fn(*args: Any, _result: Any = result, **kwargs: Any) -> Any:
            calls.append({"args": args, **kwargs})
            return _result
        setattr(module, fn_name, fn)
    monkeypatch.setitem(sys.modules, name, module)
    return calls


def _offline(*args: str) -> Any:
    return CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", *args])


def test_sync_prints_a_line_a_run_and_fails_when_one_failed(monkeypatch, tmp_path):
    reports = [FakeReport("aaaa", 7, 3, 300, "finished", None), FakeReport("bbbb", None, 0, 0, None, "HTTP 422: bad")]
    calls = _fake_module(monkeypatch, "corral.sdk.sync", sync_spool=reports)
    result = _offline("sync", str(tmp_path))
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "aaaa -> run 7: 3 batches, 300 points, finished", "bbbb -> failed: HTTP 422: bad"]
    assert calls[0]["args"] == (str(tmp_path),) and calls[0]["client"].url == "http://127.0.0.1:9"

    _fake_module(monkeypatch, "corral.sdk.sync", sync_spool=reports[:1])
    result = _offline("sync", "--json")
    assert result.exit_code == 0 and json.loads(result.output)[0]["run_id"] == 7
    calls = _fake_module(monkeypatch, "corral.sdk.sync", sync_spool=[])
    monkeypatch.delenv("CORRAL_SPOOL_DIR", raising=False)
    assert _offline("sync").output == "nothing to sync\n"
    assert calls[-1]["args"] == (None,)  # the SDK's default: $CORRAL_SPOOL_DIR, else <home>/spool
    home = str(tmp_path / "home")
    CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "--home", home, "sync"])
    assert calls[-1]["args"] == (os.path.join(home, "spool"),)  # the spool of the home given with --home


def test_import_tensorboard_prints_the_runs_it_created(monkeypatch, tmp_path):
    created = [{"id": 3, "project": "tb", "name": "exp1", "last_step": 99, "metrics": {"loss": {}, "acc": {}}}]
    calls = _fake_module(monkeypatch, "corral.sdk.tensorboard", import_tensorboard=created)
    result = _offline("import-tensorboard", str(tmp_path), "--project", "tb")
    assert result.exit_code == 0, result.output
    assert _rows(result.output) == [["3", "tb", "exp1", "99", "2"]]
    assert calls[0]["args"] == (str(tmp_path),) and calls[0]["project"] == "tb"
    assert _offline("import-tensorboard", str(tmp_path / "missing")).exit_code == 2


def test_import_tensorboard_makes_runs_that_the_other_commands_read(server_factory, tmp_path):
    tensorboardx = pytest.importorskip("tensorboardX")
    for name, scale in (("exp1", 1.0), ("exp2", 2.0)):
        with tensorboardx.SummaryWriter(logdir=str(tmp_path / "tb" / name)) as writer:
            for step in range(50):
                writer.add_scalar("loss", scale / (step + 1), step)
    server = server_factory()

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", server.home, *args])

    result = invoke("import-tensorboard", str(tmp_path / "tb"), "--project", "tb")
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert sorted((r[1], r[2], r[3], r[4]) for r in rows) == [("tb", "exp1", "49", "1"), ("tb", "exp2", "49", "1")]
    again = json.loads(invoke("import-tensorboard", str(tmp_path / "tb"), "--project", "tb", "--json").output)
    assert sorted(r["id"] for r in again) == sorted(int(r[0]) for r in rows)  # importing twice adds nothing
    exp1 = next(r[0] for r in rows if r[2] == "exp1")
    series = invoke("metrics", exp1, "loss").output.splitlines()
    assert series[0] == "loss: 50 points (all)" and series[2].split() == ["0", "1"]
    compared = invoke("compare", *[r[0] for r in rows]).output
    assert "tensorboard_dir" in compared and "(lower is better)" in compared


OFFLINE_TRAINING = """
import corral
run = corral.init(project="offline", name="spooled", config={"lr": 0.1})
for step in range(20):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
run.finish()
"""


def test_sync_uploads_an_offline_run_once(server_factory, tmp_path):
    server = server_factory()
    spool = tmp_path / "spool"
    env = {**os.environ, "CORRAL_MODE": "offline", "CORRAL_SPOOL_DIR": str(spool), "CORRAL_HOME": server.home}
    for name in ("CORRAL_URL", "CORRAL_JOB_ID", "SLURM_JOB_ID"):
        env.pop(name, None)
    subprocess.run([sys.executable, "-c", OFFLINE_TRAINING], env=env, check=True, timeout=60)
    kept = tmp_path / "kept"
    shutil.copytree(spool, kept)

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", server.home, *args])

    result = invoke("sync", str(spool))
    assert result.exit_code == 0, result.output
    line = result.output.strip()
    run_id = int(line.split("-> run ")[1].split(":")[0])
    assert re.search(r": \d+ batch(es)?, 20 points, finished$", line), line  # batching is the SDK's choice
    assert invoke("sync", str(spool)).output == "nothing to sync\n"
    # the same spool again (a copy kept, put back): the server had every batch, and the line says so
    shutil.copytree(kept, spool, dirs_exist_ok=True)
    again = invoke("sync", str(spool))
    assert again.exit_code == 0, again.output
    assert re.search(rf"-> run {run_id}: nothing new: its \d+ batch(es)? \(20 points\) (was|were) stored already, "
                     r"finished$", again.output.strip()), again.output
    shown = json.loads(invoke("run", "show", str(run_id), "--json").output)
    assert (shown["project"], shown["name"], shown["state"]) == ("offline", "spooled", "finished")
    assert shown["metrics"]["loss"]["count"] == 20


def test_run_show_marks_the_sdks_best_checkpoint_and_says_a_resumed_run_was(server_factory, tmp_path, monkeypatch):
    import corral
    from tests.integrations.conftest import JOB_VARIABLES

    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CORRAL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    server = server_factory()
    monkeypatch.setenv("CORRAL_URL", server.url)
    tracked = Tracked(server, {})

    # keep_best without best_metric: the SDK keeps the lowest; run show must mark the same one
    with corral.init(project="marks", resume_key="resumable", keep_best=1, keep_last=1) as run:
        for step, value in ((100, 0.5), (200, 0.2), (300, 0.3)):
            run.save_checkpoint({"w": step}, step=step, metric=value)
        kept_best = run.best_checkpoint()
    output = tracked.ok("run", "show", str(run.id))
    marks = {line.split()[-1]: line for line in output.splitlines() if line.strip().startswith("checkpoint")}
    assert "best" in marks[kept_best] and kept_best.endswith("ckpt-00000200.pt")
    assert "Resumed: no" in output

    with corral.init(project="marks", resume_key="resumable") as again:  # the script started again
        assert again.id == run.id
    assert "Resumed: yes (1 time)" in tracked.ok("run", "show", str(run.id))

    # a declared best_mode="max" is what judges, whatever the metric's name says
    with corral.init(project="marks", keep_best=1, best_metric="val_loss", best_mode="max") as maxed:
        for step, value in ((1, 0.1), (2, 0.9), (3, 0.5)):
            maxed.save_checkpoint({"w": step}, step=step, metric=value)
    output = tracked.ok("run", "show", str(maxed.id))
    best = [line.split()[-1] for line in output.splitlines() if line.strip().startswith("checkpoint") and "best" in line]
    assert best == [maxed.best_checkpoint()] and best[0].endswith("ckpt-00000002.pt")


def test_compare_gives_a_logged_learning_rate_no_direction_unless_declared(server_factory):
    server = server_factory()
    client = server.client()
    tracked = Tracked(server, {})
    ids = []
    for lr, loss in ((0.1, 0.3), (0.01, 0.2)):
        run = client.create_run(project="lr", config={"lr": lr})
        _log(client, run["id"], {"lr": [lr, lr / 2], "val_loss": [1.0, loss]})
        ids.append(str(run["id"]))
    lines = tracked.ok("compare", *ids).splitlines()
    lr_row = next(line for line in lines if line.split()[:2] == ["lr", "last"])
    assert "better" not in lr_row and "no direction" in lr_row and "*" not in lr_row
    loss_row = next(line for line in lines if line.split()[:2] == ["val_loss", "last"])
    assert "(lower is better)" in loss_row
    declared = json.loads(tracked.ok("compare", *ids, "--goal", "lr=max", "--json"))
    assert declared["metrics"]["lr"]["goal"] == "max" and declared["metrics"]["lr"]["best"] == [int(ids[0])]
    bad = tracked.invoke("compare", *ids, "--goal", "lr=up")
    assert bad.exit_code == 1 and "KEY=min or KEY=max" in bad.output
