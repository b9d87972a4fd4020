"""`corral.Text` and `corral.Table` logged with `run.log`: uploaded as the run's media at their step
(`media/<key>/<step:08d>.txt`, `.table.json`), downloaded back as written, carried by `corral sync`
when the run was offline; and refused, with the limit named, when too big."""

from __future__ import annotations

import io
import json
import math
import os

import numpy as np
import pandas as pd
import pytest

import corral
from corral.sdk.sync import sync_spool

FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.2}


def fetch(client, run_id: int, path: str) -> bytes:
    out = io.BytesIO()
    client.download_artifact(run_id, path, out)
    return out.getvalue()


@pytest.mark.usefixtures("sdk_env")
def test_text_and_tables_logged_by_step_are_uploaded_and_come_back_as_written(server, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", server.home)
    run = corral.init(project="media", **FAST)
    rows = [["the cat", 1, 0.25, True, None], ["le chien é", np.int64(2), np.float32(0.5), np.bool_(False), math.nan]]
    table = corral.Table(columns=["input", "label", "score", "ok", "note"], data=rows)
    rows[0][0] = "changed after logging"  # the table was copied when it was made
    frame = pd.DataFrame({"epoch": [1, 2], "loss": [0.5, float("inf")], "split": ["train", "val"]})
    run.log({"loss": 1.0, "sample": corral.Text("step 0: héllo\nworld ✓"), "preds": table}, step=0)
    run.log({"sample": corral.Text("step 7", caption="greedy"), "history": corral.Table(frame)}, step=7)
    run.finish()

    client = server.client()
    media = {a["path"]: a for a in client.artifacts(run.id)}
    assert set(media) == {"media/sample/00000000.txt", "media/sample/00000007.txt", "media/preds/00000000.table.json",
                          "media/history/00000007.table.json"}
    text = media["media/sample/00000007.txt"]
    assert (text["type"], text["step"], text["caption"], text["stored"]) == ("text", 7, "greedy", True)
    assert fetch(client, run.id, "media/sample/00000000.txt").decode("utf-8") == "step 0: héllo\nworld ✓"
    preds = media["media/preds/00000000.table.json"]
    assert (preds["type"], preds["step"]) == ("table", 0)
    assert json.loads(fetch(client, run.id, preds["path"])) == {
        "columns": ["input", "label", "score", "ok", "note"],
        "rows": [["the cat", 1, 0.25, True, None], ["le chien é", 2, 0.5, False, None]],  # NaN: null
    }
    assert json.loads(fetch(client, run.id, "media/history/00000007.table.json")) == {
        "columns": ["epoch", "loss", "split"], "rows": [[1, 0.5, "train"], [2, None, "val"]]}
    assert client.get_run(run.id)["metrics"]["loss"]["count"] == 1  # the numbers went on as metrics


@pytest.mark.usefixtures("sdk_env")
def test_an_offline_runs_text_and_tables_travel_with_sync(server_factory, monkeypatch, sdk_env):
    server = server_factory()
    monkeypatch.setenv("CORRAL_HOME", server.home)
    run = corral.init(project="media", mode="offline", **FAST)
    run.log({"loss": 0.5, "report": corral.Text("offline ✓")}, step=3)
    run.log({"confusion": corral.Table(columns=["true", "predicted", "n"], data=[["cat", "dog", 4]])}, step=4)
    run.finish()
    (report,) = sync_spool(client=server.client())
    assert report.error is None, report
    client = server.client()
    media = {a["path"]: a for a in client.artifacts(report.run_id)}
    assert {p: (a["type"], a["step"]) for p, a in media.items()} == {
        "media/report/00000003.txt": ("text", 3), "media/confusion/00000004.table.json": ("table", 4)}
    assert fetch(client, report.run_id, "media/report/00000003.txt") == "offline ✓".encode()
    assert json.loads(fetch(client, report.run_id, "media/confusion/00000004.table.json")) == {
        "columns": ["true", "predicted", "n"], "rows": [["cat", "dog", 4]]}
    assert os.listdir(sdk_env) == []  # the spool is gone once synced


def test_text_holds_at_most_one_mebibyte_of_utf8():
    assert corral.Text("é" * (1 << 19)).encode() == ("é" * (1 << 19)).encode()  # exactly 1 MiB in UTF-8
    with pytest.raises(ValueError, match=r"1,048,577 bytes in UTF-8; corral.Text holds at most 1 MiB"):
        corral.Text("é" * (1 << 19) + "x")
    with pytest.raises(ValueError, match="corral.Text takes a str, not bytes"):
        corral.Text(b"bytes")
    with pytest.raises(ValueError, match="cannot be written as UTF-8"):
        corral.Text("lone \ud800 surrogate")


def test_tables_hold_at_most_100_columns_and_10000_rows():
    wide = [f"c{i}" for i in range(100)]
    assert len(json.loads(corral.Table(columns=wide, data=[list(range(100))]).encode())["columns"]) == 100
    with pytest.raises(ValueError, match="the table has 101 columns; corral.Table holds at most 100 columns"):
        corral.Table(columns=[*wide, "one more"])
    long = corral.Table(columns=["i"], data=np.arange(10_000).reshape(-1, 1))
    assert len(json.loads(long.encode())["rows"]) == 10_000
    with pytest.raises(ValueError, match="the table has 10,001 rows; corral.Table holds at most 10,000 rows"):
        corral.Table(columns=["i"], data=[[i] for i in range(10_001)])
    with pytest.raises(ValueError, match=r"row 1 of the table must be a list of 2 cells"):
        corral.Table(columns=["a", "b"], data=[[1, 2], [3]])
    with pytest.raises(ValueError, match="columns must be the list of the table's column names"):
        corral.Table(data=[[1]])
    with pytest.raises(ValueError, match="either as a DataFrame or as columns= and data="):
        corral.Table(columns=["a"], dataframe=pd.DataFrame({"a": [1]}))


def test_table_cells_are_numbers_strings_bools_or_null():
    frame = pd.DataFrame({"when": pd.to_datetime(["2024-01-02", None]), "n": pd.array([1, None], dtype="Int64"),
                          "x": [np.inf, -np.inf]})
    table = json.loads(corral.Table(dataframe=frame).encode())
    assert table == {"columns": ["when", "n", "x"], "rows": [["2024-01-02 00:00:00", 1, None], [None, None, None]]}
    odd = json.loads(corral.Table(columns=[0, 1], data=[[{"k": 1}, 2**70]]).encode())
    assert odd == {"columns": ["0", "1"], "rows": [["{'k': 1}", 2**70]]}  # anything else is its str()
