"""HomeLayout names every path a running server and its jobs make in the home."""

from __future__ import annotations

import os

from corral.home import HomeLayout


def test_every_path_a_server_and_its_job_make_in_the_home_is_one_home_layout_names(server_factory):
    server = server_factory(gpus=0)
    layout = HomeLayout(server.home)
    client = server.client()
    job = client.submit(["sh", "-c", 'echo "$CORRAL_CHECKPOINT_DIR"'], gpus=0)
    done = client.wait(job["id"], timeout=30, poll=0.1)
    assert done["state"] == "COMPLETED"
    stdout, _, _ = client.logs(job["id"])
    assert stdout.decode().strip() == layout.checkpoint_dir(job["id"])

    named = {layout.server_info, layout.lock, layout.socket, layout.database, layout.jobs, layout.checkpoints,
             layout.logs, layout.spool, layout.server_log, layout.config, layout.webhook_token, layout.artifacts,
             layout.log_ledgers}
    made = {os.path.join(server.home, name) for name in os.listdir(server.home)}
    # SQLite's own companions of the database file (WAL mode) go with it
    made = {path for path in made if not path.startswith(layout.database + "-")}
    assert made <= named, f"paths in the home that HomeLayout does not name: {sorted(made - named)}"
    assert {layout.server_info, layout.lock, layout.socket, layout.database} <= made
    assert os.listdir(layout.jobs) == [str(job["id"])] and os.path.isdir(layout.job_dir(job["id"]))
    assert os.listdir(layout.checkpoints) == [str(job["id"])]
    assert os.path.dirname(done["stdout_path"]) == layout.user_logs(done["user"])
