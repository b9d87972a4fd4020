"""Runs the real `wandb` wrote offline (WANDB_MODE=offline), imported by `corral import-wandb` into a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sdk.wandb_offline import read_records, run_files
from tests.helpers import needs

pytestmark = needs("wandb")

TRAIN = textwrap.dedent("""
    import sys
    import wandb

    run = wandb.init(project="wb-proj", mode="offline", dir=sys.argv[1], name="first", tags=["baseline", "lr-1e-3"],
                     config={"lr": 1e-3, "model": {"depth": 4, "act": "gelu"}})
    for step in range(0, 10, 2):
        run.log({"train/loss": 1.0 / (step + 1), "acc": step / 10}, step=step)
    run.log({"val": {"loss": 0.25}, "note": "not a number"}, step=8)
    wandb.config.update({"warmup": 100})
    run.summary["best_acc"] = 0.9
    run.summary["best_checkpoint"] = "ckpt-8.pt"
    run.finish()

    crashed = wandb.init(project="wb-proj", mode="offline", dir=sys.argv[1], name="second", config={"lr": 1e-2})
    for step in range(3):
        crashed.log({"train/loss": 2.0 - step}, step=step)
    crashed.finish(exit_code=1)
""")


@pytest.fixture(scope="module")
def offline_runs(tmp_path_factory) -> str:
    where = tmp_path_factory.mktemp("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONFIG_DIR=str(where / "config"),
               WANDB_CACHE_DIR=str(where / "cache"), WANDB_DATA_DIR=str(where / "data"), WANDB_DISABLE_GIT="true")
    (where / "train.py").write_text(TRAIN)
    subprocess.run([sys.executable, "train.py", str(where)], cwd=where, env=env, check=True, timeout=120,
                   capture_output=True)
    return str(where / "wandb")


def _import(home: str, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--home", home, "import-wandb", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_wandbs_offline_files_are_found_and_framed(offline_runs):
    files = run_files([offline_runs])
    assert len(files) == 2 and all(os.path.basename(f).startswith("run-") for f in files)
    assert all(len(list(read_records(f))) > 5 for f in files)


def test_import_wandb_brings_config_summary_history_and_tags_once(server_factory, offline_runs):
    server = server_factory()
    client = server.client()
    first_import = _import(server.home, offline_runs)
    runs = {r["name"]: r for r in first_import}
    assert set(runs) == {"first", "second"}

    first = client.get_run(runs["first"]["id"])
    assert first["project"] == "wb-proj" and first["state"] == "finished"
    assert first["tags"] == ["baseline", "lr-1e-3", "wandb"]
    assert first["config"] == {"lr": 1e-3, "model": {"depth": 4, "act": "gelu"}, "warmup": 100,
                               # the summary's values that are no numbers: W&B keeps the last text logged too
                               "wandb_summary": {"best_checkpoint": "ckpt-8.pt", "note": "not a number"}}
    loss = client.series(first["id"], "train/loss")
    assert loss["steps"] == [0, 2, 4, 6, 8] and loss["values"] == [1.0, 1 / 3, 0.2, 1 / 7, 1 / 9]
    assert client.series(first["id"], "val.loss")["steps"] == [8]  # a nested value, named as W&B shows it
    best = client.series(first["id"], "best_acc")  # a summary number never logged: a metric at the last step
    assert (best["steps"], best["values"]) == ([8], [0.9])
    assert runs["first"]["skipped_values"] == 1  # the text value
    assert first["start_time"] <= first["end_time"]

    second = client.get_run(runs["second"]["id"])
    assert second["state"] == "failed" and second["config"] == {"lr": 1e-2}
    assert client.series(second["id"], "train/loss")["values"] == [2.0, 1.0, 0.0]

    # importing again changes nothing
    again = _import(server.home, offline_runs)
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in first_import)
    assert len(client.runs(project="wb-proj")) == 2
    assert client.series(first["id"], "train/loss")["count"] == 5
    assert client.get_run(first["id"])["config"] == first["config"]


def test_a_project_given_overrides_wandbs(server_factory, offline_runs):
    server = server_factory()
    imported = _import(server.home, "-p", "moved", offline_runs)
    assert {r["project"] for r in imported} == {"moved"}


def test_without_wandb_the_command_names_the_extra(server_factory, offline_runs):
    server = server_factory()
    code = ("import sys; sys.modules['wandb'] = None\n"
            "from corral.cli.main import cli\n"
            f"cli(['--home', {server.home!r}, 'import-wandb', {offline_runs!r}])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'corral[wandb]'" in done.stderr and "corral: error:" in done.stderr
    assert server.client().runs() == []  # nothing sent
