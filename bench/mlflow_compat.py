"""The `mlflow` client's `log_batch` of 1,000 metric points: corral against MLflow's own server, in one run.

Starts a corral server (SQLite in its home) and MLflow's tracking server (`mlflow server
--backend-store-uri sqlite:///...`, from a separate virtual environment with the full `mlflow`
package: --mlflow-venv, default /tmp/mlflow-venv; make it with
`python3 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow`), then times the same
call against each, alternating so both share the machine's weather:

- `MlflowClient().log_batch(run_id, metrics=[...1,000 Metric...])`, the client unchanged: what a
  training script waits for, the client's own work (protobuf, JSON) included;
- the very request that call sends (`POST /api/2.0/mlflow/runs/log-batch`, its JSON body made by the
  client's own `message_to_json`), posted on a kept-alive connection: the server's part alone.

Each batch is 10 keys x 100 steps, steps moving on from call to call (so corral stores every point;
it keeps one point per step and key). Afterwards it checks that corral holds every point sent.

    .venv/bin/python bench/mlflow_compat.py               # 30 calls each
    .venv/bin/python bench/mlflow_compat.py --calls 100 --json -
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Http, Server, add_common_args, emit, log, median, verdict  # noqa: E402

FLOOR = 20.0  # corral at least this many times faster per call
KEYS, STEPS = 10, 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mlflow(venv: str, workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    exe = os.path.join(venv, "bin", "mlflow")
    if not os.path.exists(exe):
        raise SystemExit(f"no MLflow server at {exe}: python3 -m venv {venv} && {venv}/bin/pip install mlflow")
    port = free_port()
    db = os.path.join(workdir, "mlflow.db")
    proc = subprocess.Popen(
        [exe, "server", "--backend-store-uri", f"sqlite:///{db}", "--default-artifact-root", os.path.join(workdir, "art"),
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir, stdout=open(os.path.join(workdir, "mlflow.log"), "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"mlflow server exited ({proc.returncode}); see {workdir}/mlflow.log")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"mlflow server did not answer in 180 s; see {workdir}/mlflow.log")


class Target:
    """One server under test: its client, a run, and a kept-alive connection for the raw request."""

    def __init__(self, name: str, url: str, token: str | None = None) -> None:
        from mlflow import MlflowClient

        self.name, self.url = name, url
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.client = MlflowClient(tracking_uri=url)
        experiment = self.client.create_experiment(f"bench-{name}-{time.time_ns()}")
        self.run_id = self.client.create_run(experiment).info.run_id
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        self.client_s: list[float] = []
        self.wire_s: list[float] = []

    def log_batch(self, metrics: list) -> None:
        began = time.perf_counter()
        self.client.log_batch(self.run_id, metrics=metrics)
        self.client_s.append(time.perf_counter() - began)

    def post(self, body: bytes) -> None:
        began = time.perf_counter()
        self.conn.request("POST", "/api/2.0/mlflow/runs/log-batch", body, self.headers)
        answer = self.conn.getresponse()
        answer.read()
        self.wire_s.append(time.perf_counter() - began)
        if answer.status != 200:
            raise RuntimeError(f"{self.name}: log-batch answered {answer.status}")


def batch(call: int) -> list:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(f"train/metric_{k}", float(i % 7) / 7, now + i, call * STEPS + i) for k in range(KEYS)
            for i in range(STEPS)]


def wire_body(run_id: str, metrics: list) -> bytes:
    """The body `MlflowClient.log_batch` sends, made as it makes it."""
    from mlflow.protos.service_pb2 import LogBatch
    from mlflow.utils.proto_json_utils import message_to_json

    return message_to_json(LogBatch(run_id=run_id, metrics=[m.to_proto() for m in metrics])).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30, help="Calls of each kind against each server (the median is reported).")
    parser.add_argument("--mlflow-venv", default="/tmp/mlflow-venv", help="A virtual environment with the full mlflow package.")
    add_common_args(parser)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="mlflow-bench-")
    mlflow_proc, mlflow_url = start_mlflow(args.mlflow_venv, workdir)
    try:
        with Server(gpus=0, keep_home=args.keep_home, profile=args.profile) as server:
            token = Http(server.url).call("POST", "/api/v1/tokens", {"name": "bench", "expires": "1d"})["token"]
            os.environ["MLFLOW_TRACKING_TOKEN"] = token  # corral's; MLflow's server ignores it
            corral = Target("corral", server.url, token)
            mlflow = Target("mlflow", mlflow_url, token)
            log(f"corral at {server.url}, MLflow's server at {mlflow_url}; {args.calls} calls of each kind on each")
            for call in range(2 * args.calls):
                metrics = batch(call)
                for target in (corral, mlflow) if call % 2 == 0 else (mlflow, corral):
                    if call < args.calls:
                        target.log_batch(metrics)
                    else:
                        target.post(wire_body(target.run_id, metrics))
            stored = sum(m["count"] for m in Http(server.url).call("GET", f"/api/v1/runs/{corral.run_id}")["metrics"].values())
    finally:
        mlflow_proc.terminate()
        mlflow_proc.wait(30)
        if not args.keep_home:
            shutil.rmtree(workdir, ignore_errors=True)

    sent = 2 * args.calls * KEYS * STEPS
    c_client, m_client = median(corral.client_s) * 1000, median(mlflow.client_s) * 1000
    c_wire, m_wire = median(corral.wire_s) * 1000, median(mlflow.wire_s) * 1000
    speedup_client, speedup_wire = m_client / c_client, m_wire / c_wire
    result = {
        "calls": args.calls, "points_per_call": KEYS * STEPS,
        "client_ms": {"corral": c_client, "mlflow": m_client, "speedup": speedup_client},
        "wire_ms": {"corral": c_wire, "mlflow": m_wire, "speedup": speedup_wire},
        "corral_points_sent": sent, "corral_points_stored": stored, "floor": FLOOR,
        "verdict_client": verdict(speedup_client, FLOOR, True), "verdict_wire": verdict(speedup_wire, FLOOR, True),
    }
    emit(result, [
        ("MlflowClient().log_batch, 1,000 points, median: corral", c_client, "ms"),
        ("                                   MLflow's own server", m_client, "ms"),
        ("                                   corral faster by", speedup_client,
         f"x ({result['verdict_client']}, floor {FLOOR:.0f}x; the client's own work included)"),
        ("the same request on the wire, median: corral", c_wire, "ms"),
        ("                               MLflow's own server", m_wire, "ms"),
        ("                               corral faster by", speedup_wire, f"x ({result['verdict_wire']}, floor {FLOOR:.0f}x)"),
        ("points sent to corral / stored", f"{sent:,} / {stored:,}", ""),
    ], args.json)
    if stored != sent:
        print(f"ERROR: corral stored {stored:,} of {sent:,} points", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
