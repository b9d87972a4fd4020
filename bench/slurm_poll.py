"""The Slurm backend's cost: Slurm calls per poll, and how soon a job's end shows in corral.

Needs the testbed (scripts/slurm-testbed.sh start; as root). Starts a corral server with
--backend slurm whose Slurm commands go through counting shims, then:

1. counts the Slurm calls the server makes per poll with 10 and with --queued jobs waiting in
   Slurm (they must not grow with the number of jobs);
2. times, for --samples short jobs, the moment the job's last command ran to the moment the API
   shows it COMPLETED: with corral's epilog installed (scripts/slurm-epilog.sh as EpilogSlurmctld,
   told about this server in /etc/corral/epilog.env), and without it (the poll alone).

    sudo .venv/bin/python bench/slurm_poll.py            # --queued 1000 --samples 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import REPO, Http, Server, add_common_args, emit, log, median, percentile, verdict  # noqa: E402

FLOOR_S = 1.0
EPILOG_ENV = "/etc/corral/epilog.env"
COMMANDS = ("sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--window", type=float, default=20.0, help="Seconds to count calls over.")
    add_common_args(parser)
    args = parser.parse_args()

    subprocess.run(["bash", os.path.join(REPO, "scripts", "slurm-testbed.sh"), "start"], check=True)
    shims = tempfile.mkdtemp(prefix="corral-slurm-shims-")
    calls_log = os.path.join(shims, "calls.log")
    for name in COMMANDS:
        real = shutil.which(name)
        with open(os.path.join(shims, name), "w") as f:
            f.write(f'#!/bin/sh\necho {name} >> "{calls_log}"\nexec "{real}" "$@"\n')
        os.chmod(os.path.join(shims, name), 0o755)
    os.environ["PATH"] = shims + os.pathsep + os.environ["PATH"]
    saved_env = open(EPILOG_ENV).read() if os.path.exists(EPILOG_ENV) else None
    try:
        with Server(gpus=0, keep_home=args.keep_home, extra=["--backend", "slurm"]) as server:
            http = Http(server.url)
            blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "3600"], "gpus": 4, "name": "blocker",
                                                              "time": "60"})
            queued = [http.call("POST", "/api/v1/jobs", {"command": ["true"], "gpus": 4, "name": "queued"})["id"]
                      for _ in range(10)]
            few = count_calls(calls_log, args.window)
            log(f"with {len(queued)} queued: {few}")
            queued += [http.call("POST", "/api/v1/jobs", {"command": ["true"], "gpus": 4, "name": "queued"})["id"]
                       for _ in range(args.queued - len(queued))]
            wait_submitted(http, queued)
            many = count_calls(calls_log, args.window)
            log(f"with {len(queued)} queued: {many}")

            os.makedirs(os.path.dirname(EPILOG_ENV), exist_ok=True)
            with open(EPILOG_ENV, "w") as f:
                f.write(f"CORRAL_URL={server.url}\nCORRAL_TOKEN_FILE={os.path.join(server.home, 'webhook.token')}\n")
            with_epilog = end_to_seen(http, server.home, args.samples)
            os.unlink(EPILOG_ENV)
            without = end_to_seen(http, server.home, args.samples)
            http.call("POST", f"/api/v1/jobs/{blocker['id']}/cancel")
            # only the jobs this benchmark queued: the cluster may run other people's jobs named "queued"
            http.call("POST", "/api/v1/jobs/cancel", {"jobs": [str(job_id) for job_id in queued]})
    finally:
        if saved_env is not None:
            with open(EPILOG_ENV, "w") as f:
                f.write(saved_env)
        elif os.path.exists(EPILOG_ENV):
            os.unlink(EPILOG_ENV)
        shutil.rmtree(shims, ignore_errors=True)

    seen = median(with_epilog)
    result = {
        "queued": args.queued, "calls_per_poll_few": few["per_poll"], "calls_per_poll_many": many["per_poll"],
        "calls_few": few, "calls_many": many, "end_to_seen_s": seen, "end_to_seen_p90_s": percentile(with_epilog, 90),
        "end_to_seen_without_epilog_s": median(without), "floor_s": FLOOR_S, "verdict": verdict(seen, FLOOR_S, False),
    }
    emit(result, [
        ("Slurm calls per poll, 10 jobs queued", few["per_poll"], f"({few['squeue']} squeue, {few['sacct']} sacct in {args.window:g} s)"),
        (f"Slurm calls per poll, {args.queued} jobs queued", many["per_poll"], f"({many['squeue']} squeue, {many['sacct']} sacct)"),
        ("a job's end -> corral shows it, with the epilog, median", seen, f"s ({result['verdict']}, floor {FLOOR_S:g} s)"),
        ("  p90", result["end_to_seen_p90_s"], "s"),
        ("the same without the epilog (the poll alone), median", result["end_to_seen_without_epilog_s"], "s"),
    ], args.json)
    return 0 if many["per_poll"] <= few["per_poll"] + 0.5 else 1


def count_calls(calls_log: str, window: float) -> dict:
    open(calls_log, "w").close()
    time.sleep(window)
    with open(calls_log) as f:
        names = f.read().split()
    counts = {name: names.count(name) for name in COMMANDS}
    polls = max(1, counts["squeue"])
    reads = counts["squeue"] + counts["sacct"] + counts["scontrol"]
    return {**counts, "polls": polls, "per_poll": reads / polls}


def wait_submitted(http: Http, ids: list[int]) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if all(http.call("GET", f"/api/v1/jobs/{i}").get("backend_id") for i in ids[-5:]):
            return
        time.sleep(0.5)
    raise RuntimeError("the queued jobs did not all reach Slurm")


def end_to_seen(http: Http, home: str, samples: int) -> list[float]:
    out = []
    for i in range(samples):
        stamp = os.path.join(home, f"ended-{time.monotonic_ns()}")
        # runs a few seconds, so that its end falls anywhere between two polls
        script = f"sleep {2 + (i % 4) * 0.37:.2f}; date +%s.%N > {stamp}"
        # a time limit lets Slurm's backfill start it ahead of the queued jobs, which wait for the GPUs
        job = http.call("POST", "/api/v1/jobs", {"command": ["sh", "-c", script], "name": "probe", "time": "1"})
        while True:
            state = http.call("GET", f"/api/v1/jobs/{job['id']}")["state"]
            if state not in ("PENDING", "RUNNING"):
                seen = time.time()
                break
            time.sleep(0.01)
        with open(stamp) as f:
            out.append(seen - float(f.read()))
        time.sleep(0.5)
    return out


if __name__ == "__main__":
    sys.exit(main())
