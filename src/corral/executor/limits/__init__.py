"""The rules a job's supervisor enforces while the job runs, each a small `Limit` (dramatiq's middleware).

`Supervisor.watch` looks at them in its order after every wake-up; the first whose `check(now, job)` returns
an `Ending` decides how the job ends, and none ends it a second time. The rules:

- `marks.py`: the server's marks in the job directory (`preempt`, `fail`, `node_fail`, `cancel`) and a cancel
  by signal;
- `log_limits.py`: the logs' limits (`JobLogs.stopped`: max_log_mb, log_reserve_mb, the owner's quota);
- `time_limit.py`: the time limit, and an interactive job's notice before it;
- `warning.py`: sbatch's --signal, sent T seconds before the time limit;
- `memory.py`: the memory limit (the cgroup's OOM kills, else the processes' summed RSS).

`base.py` holds what they share. Standard library only: the supervisor imports it for every job.
"""

from corral.executor.limits.base import Ending, Limit, WatchedJob, first_ending
from corral.executor.limits.log_limits import LogLimits
from corral.executor.limits.marks import Cancel, FailMark, NodeFailMark, PreemptMark, read_reason
from corral.executor.limits.memory import MEMORY_CHECK_INTERVAL_S, MemoryLimit, note_memory_kill, oom_killed
from corral.executor.limits.time_limit import TimeLimit, TimeLimitNotice
from corral.executor.limits.warning import WarningSignalDue

__all__ = [
    "MEMORY_CHECK_INTERVAL_S", "Cancel", "Ending", "FailMark", "Limit", "LogLimits", "MemoryLimit", "NodeFailMark",
    "PreemptMark", "TimeLimit", "TimeLimitNotice", "WarningSignalDue", "WatchedJob", "first_ending", "note_memory_kill",
    "oom_killed", "read_reason",
]
