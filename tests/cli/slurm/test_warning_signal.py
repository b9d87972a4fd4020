"""sbatch's --signal as Slurm 22.05 delivers it (captured on the testbed: docs/slurm-testbed.md): without `B:`
SIGCONT then the signal go once to every process of the job's srun steps and not to the batch shell (a job
without a step running gets nothing); with `B:` to the batch shell alone, not to its steps; a `scontrol requeue` stops the job with SIGTERM, never the
warning, and its stderr says DUE TO JOB REQUEUE."""

from __future__ import annotations

import sys

# A step's task: records each signal it gets, then ends a second after the first (a second delivery, as an
# srun passing on what it got, comes within that), or once the batch shell leaves `stop`.
TASK = """
import os, signal, sys, time
rank, folder = os.environ["SLURM_PROCID"], sys.argv[1]
got = []
for number in (signal.SIGUSR1, signal.SIGCONT, signal.SIGTERM):
    signal.signal(number, lambda n, frame: got.append(signal.Signals(n).name))
open(os.path.join(folder, "ready." + rank), "w").close()
first = None
while not os.path.exists(os.path.join(folder, "stop")):
    if got and first is None:
        first = time.monotonic()
    if first is not None and time.monotonic() - first > 1.0:
        break
    time.sleep(0.02)
with open(os.path.join(folder, "task." + rank), "w") as f:
    f.write(" ".join(got))
"""

BATCH = """#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --time=0:40
#SBATCH --signal={signal}
trap 'echo USR1 >> {folder}/batch; touch {folder}/stop' USR1
trap 'echo TERM >> {folder}/batch' TERM
srun {python} {folder}/task.py {folder} &
wait; wait  # the first ends early when a trap runs
echo done >> {folder}/batch
"""


def _job(client, folder, signal: str) -> int:
    folder.mkdir()
    (folder / "task.py").write_text(TASK)
    script = BATCH.format(signal=signal, folder=folder, python=sys.executable)
    return client.submit(script=script, workdir=str(folder), stdout="out", stderr="err")["id"]


def _read(path) -> str:
    return path.read_text().strip() if path.exists() else "(nothing)"


NO_STEP = """#!/bin/bash
#SBATCH --time=0:40
#SBATCH --signal=USR1@30
sleep 12  # past the warning, which goes to steps and it has none: nothing gets it (bash would die of it)
echo lived
"""


def test_the_warning_reaches_each_step_task_once_and_with_b_the_batch_shell_alone(server_factory, tmp_path):
    server = server_factory(gpus=0, extra=["--cpus", "5"])
    client = server.client()
    # 10 s after the start: both jobs' tasks are up by then, their batch shells waiting on their srun, even
    # where a loaded machine takes seconds to start an srun and its two tasks
    steps = _job(client, tmp_path / "steps", "USR1@30")
    batch = _job(client, tmp_path / "batch", "B:USR1@30")
    alone = client.submit(script=NO_STEP, workdir=str(tmp_path), stdout="alone.out")["id"]
    for job in (steps, batch, alone):
        ended = client.wait(job, timeout=60)
        assert ended["state"] == "COMPLETED", (ended, _read(tmp_path / "steps" / "err"))
    assert _read(tmp_path / "alone.out") == "lived"
    for rank in ("0", "1"):
        assert (tmp_path / "steps" / f"ready.{rank}").exists()
        # SIGCONT first, as Slurm's send_job_warn_signal; each once: the srun client passed nothing on
        assert sorted(_read(tmp_path / "steps" / f"task.{rank}").split()) == ["SIGCONT", "SIGUSR1"]
        assert _read(tmp_path / "batch" / f"task.{rank}") == ""  # B: is the batch shell's alone
    assert _read(tmp_path / "steps" / "batch") == "done"  # the batch shell got nothing and lived on
    assert _read(tmp_path / "batch" / "batch").splitlines() == ["USR1", "done"]


REQUEUED = """#!/bin/bash
#SBATCH --time=0:40
#SBATCH --signal=USR1@10
#SBATCH --open-mode=append
echo "run $SLURM_RESTART_COUNT"
if [ "$SLURM_RESTART_COUNT" = 0 ]; then
  trap 'echo "batch got TERM"' TERM  # it outlives the stop's SIGTERM: what its step got is written meanwhile
  srun {python} -c '
import signal, subprocess, os, time
def tell(number, frame):
    os.write(1, ("task got " + signal.Signals(number).name + "\\n").encode())
    os._exit(0)
for number in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(number, tell)
subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]])
time.sleep(30)
' &
  wait; wait
fi
echo "run $SLURM_RESTART_COUNT ends"
"""


def test_scontrol_requeue_stops_the_job_with_sigterm_and_says_so_and_the_job_runs_again(server_factory, tmp_path):
    server = server_factory(gpus=0)
    client = server.client()
    job = client.submit(script=REQUEUED.format(python=sys.executable), workdir=str(tmp_path), stdout="out",
                        stderr="err")["id"]
    ended = client.wait(job, timeout=60)
    out, err = _read(tmp_path / "out").splitlines(), _read(tmp_path / "err")
    assert (ended["state"], ended["restarts"]) == ("COMPLETED", 1), (ended, out, err)
    # SIGTERM, never the warning: a requeue is not a time limit
    first, again = out[:out.index("run 1")], out[out.index("run 1"):]
    assert first[0] == "run 0" and "task got SIGTERM" in first and again == ["run 1", "run 1 ends"], (out, err)
    assert "task got SIGUSR1" not in out
    assert f"*** JOB {job} ON " in err and " DUE TO JOB REQUEUE ***" in err, err
