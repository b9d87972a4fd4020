"""Experiment tracker client for the course's GPU cluster.

Import it in your training script and call the functions below. The tracker's address comes from
the TRACKER_API environment variable and your key from TRACKER_API_KEY; the Slurm job and node are
read from the environment Slurm gives the job.

    from course_tracker_client import create_run, log_metric, log_metrics_batch, log_artifact

    run_id = create_run(experiment_id=3, config={"lr": 1e-3, "batch_size": 64})
    for epoch in range(10):
        ...
        log_metrics_batch(run_id, step=epoch, metrics={"train_loss": loss, "val_acc": acc})
    log_artifact(run_id, "checkpoints/final.pt", type="checkpoint")

(This is the client as the course hands it out: corral's tests run it unchanged against corral.)
"""

import os
import subprocess
from datetime import datetime, timezone

import requests

TRACKER_API = os.environ.get("TRACKER_API", "http://localhost:8000").rstrip("/")
API_KEY = os.environ.get("TRACKER_API_KEY", "")
TIMEOUT = 10


def _headers():
    headers = {"Content-Type": "application/json"}
    if API_KEY:
        headers["X-API-Key"] = API_KEY
    return headers


def _gpu_type():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def create_run(experiment_id, config=None, gpu_type=None):
    """Register a new run of an experiment; returns its run_id."""
    payload = {
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_node": os.environ.get("SLURMD_NODENAME"),
        "config": config or {},
        "gpu_type": gpu_type or os.environ.get("TRACKER_GPU_TYPE") or _gpu_type(),
    }
    resp = requests.post(f"{TRACKER_API}/experiments/{experiment_id}/runs", json=payload, headers=_headers(),
                         timeout=TIMEOUT)
    resp.raise_for_status()
    return resp.json()["run_id"]


def log_metric(run_id, name, value, step):
    """Log one metric value at a step."""
    resp = requests.post(f"{TRACKER_API}/runs/{run_id}/metrics",
                         json={"name": name, "value": float(value), "step": int(step)},
                         headers=_headers(), timeout=TIMEOUT)
    resp.raise_for_status()
    return resp.json()


def log_metrics_batch(run_id, step, metrics):
    """Log several metrics at one step in one request."""
    payload = {
        "step": int(step),
        "metrics": {name: float(value) for name, value in metrics.items()},
        "timestamp": datetime.now(timezone.utc).isoformat(),
    }
    resp = requests.post(f"{TRACKER_API}/runs/{run_id}/metrics/batch", json=payload, headers=_headers(),
                         timeout=TIMEOUT)
    resp.raise_for_status()
    return resp.json()


def log_artifact(run_id, path, type="checkpoint"):
    """Record a file the run wrote (a checkpoint, a plot); the file stays where it is."""
    size = os.path.getsize(path) if os.path.exists(path) else None
    payload = {"path": os.path.abspath(path), "type": type, "size_bytes": size}
    resp = requests.post(f"{TRACKER_API}/runs/{run_id}/artifacts", json=payload, headers=_headers(),
                         timeout=TIMEOUT)
    resp.raise_for_status()
    return resp.json()
