"""sbatch's --mail-type: mail to a job's --mail-user when it begins, ends, fails, is requeued or reaches a
share of its time limit, through the server's relay (`[smtp]`), with Slurm's subject lines
(`Slurm Job_id=12 Name=train Began, Queued time 00:00:01`).

The job service tells `JobMail` of starts, requeues and each pass (for the time-limit shares); ends come
through its `on_job_ended` listeners. Mail is sent on a thread of its own, so that a slow relay never
holds the scheduler up; a mail that cannot be sent is logged and dropped, as slurmctld's MailProg does.
"""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formatdate, make_msgid

from corral.core.scheduling.admission import mail_warning
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.monitor.channels.mail import relay
from corral.monitor.channels.notification import SmtpSettings

log = logging.getLogger("corral.server")

# the shares of the time limit that TIME_LIMIT_50/80/90 mail at, highest first
_SHARES = ((90, "TIME_LIMIT_90"), (80, "TIME_LIMIT_80"), (50, "TIME_LIMIT_50"))
# states whose end is an END mail (Slurm's: completed or cancelled); every other ending is a FAIL
_ENDED_WELL = (JobState.COMPLETED, JobState.CANCELLED)
_UNFOLDED = SMTP.clone(max_line_length=998)  # a subject on one line, as slurmctld's mail(1) writes it


def duration(seconds: float) -> str:
    """Slurm's elapsed time in a mail: 00:01:02, 1-02:03:04."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def subject(job: Job, event: str, now: float) -> str:
    """The subject slurmctld gives the mail for `event` (BEGIN, END, FAIL, REQUEUE, TIME_LIMIT_90...)."""
    head = f"Slurm Job_id={job.id} Name={job.spec.name}"
    run_time = duration((job.end_time or now) - job.start_time) if job.start_time is not None else duration(0)
    if event == "BEGIN":
        return f"{head} Began, Queued time {duration(now - job.submit_time)}"
    if event in ("END", "FAIL"):
        exit_code = job.exit_code if job.exit_code is not None else 0
        return f"{head} {'Ended' if event == 'END' else 'Failed'}, Run time {run_time}, {job.state.value}, ExitCode {exit_code}"
    if event == "REQUEUE":
        return f"{head} Requeued, Run time {run_time}"
    if event == "TIME_LIMIT":
        return f"{head} Reached time limit, Run time {run_time}"
    return f"{head} Reached {event.rsplit('_', 1)[1]}% of time limit, Run time {run_time}"


def _per_job(job: Job) -> bool:
    """An array's tasks are mailed about one by one only with ARRAY_TASKS; else the array, as one job."""
    return job.array_job_id is None or "ARRAY_TASKS" in job.spec.mail_type


class JobMail:
    """What --mail-type asks for, sent. `smtp` None: this server sends no mail (and says so once). `by_backend`: the
    backend sends its jobs' mail itself (Slurm), and nothing here does."""

    def __init__(self, smtp: SmtpSettings | None, by_backend: bool = False) -> None:
        self.smtp = smtp
        self.by_backend = by_backend
        self._thread: ThreadPoolExecutor | None = None
        self._limits: dict[int, set[str]] = {}  # running jobs that asked for TIME_LIMIT_* -> those still to send
        self._warned = False

    def unsent(self, job: Job) -> list[str]:
        """What `show` says of the job's mail: that none will be sent, where it asks for some and this server has no
        relay (`corral.core.scheduling.admission.mail_warning`, as its submit said)."""
        warning = mail_warning(job.spec, self.by_backend or self.smtp is not None)
        return [warning] if warning else []

    def started(self, jobs: Iterable[Job], now: float) -> None:
        for job in jobs:
            types = job.spec.mail_type
            if not types or not _per_job(job):
                continue
            if "BEGIN" in types:
                self._send(job, "BEGIN", now)
            shares = {name for _, name in _SHARES if name in types}
            if shares and job.spec.time_limit_s:
                self._limits[job.id] = shares

    def requeued(self, job: Job, now: float) -> None:
        self._limits.pop(job.id, None)
        if "REQUEUE" in job.spec.mail_type and _per_job(job):
            self._send(job, "REQUEUE", now)

    def ended(self, job: Job) -> None:
        """An `on_job_ended` listener: END or FAIL, as slurmctld chooses between them."""
        self._limits.pop(job.id, None)
        types = job.spec.mail_type
        if not types or not _per_job(job):
            return
        now = job.end_time or 0.0
        if job.state is JobState.TIMEOUT and "TIME_LIMIT" in types:
            self._send(job, "TIME_LIMIT", now)
        if job.state in _ENDED_WELL:
            if "END" in types:
                self._send(job, "END", now)
        elif "FAIL" in types:
            self._send(job, "FAIL", now)
        elif "END" in types:
            self._send(job, "END", now)

    def time_limits(self, running: dict[int, Job], now: float) -> None:
        """Mail the time-limit shares reached since the last pass (the highest one reached, once)."""
        for job_id, waiting in list(self._limits.items()):
            job = running.get(job_id)
            if job is None or job.start_time is None or not job.spec.time_limit_s:
                self._limits.pop(job_id, None)
                continue
            used = 100 * (now - job.start_time) / job.spec.time_limit_s
            for share, name in _SHARES:
                if used >= share:
                    if name in waiting:
                        self._send(job, name, now)
                    waiting.difference_update(n for s, n in _SHARES if s <= share)
                    break
            if not waiting:
                self._limits.pop(job_id, None)

    def close(self) -> None:
        """Let the mails in flight go out (each bounded by [smtp] timeout_s)."""
        if self._thread is not None:
            self._thread.shutdown(wait=True)

    def _send(self, job: Job, event: str, now: float) -> None:
        smtp = self.smtp
        if smtp is None:
            if not self._warned:
                log.warning("job %d asks for mail (--mail-type), but this server has no [smtp] relay", job.id)
                self._warned = True
            return
        to = job.spec.mail_user or job.spec.user
        if "@" not in to:
            to = f"{to}@{smtp.domain or smtp.sender.rpartition('@')[2] or 'localhost'}"
        message = EmailMessage(policy=_UNFOLDED)
        message["Subject"] = subject(job, event, now)
        message["From"] = smtp.sender
        message["To"] = to
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain=smtp.sender.rpartition("@")[2] or None)
        message.set_content("")  # slurmctld's mails say it all in the subject
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-mail")
        self._thread.submit(self._deliver, smtp, message, to, job.id)

    @staticmethod
    def _deliver(smtp: SmtpSettings, message: EmailMessage, to: str, job_id: int) -> None:
        try:
            relay(smtp.host, smtp.port, smtp, message, smtp.sender, [to], smtp.timeout_s)
        except (smtplib.SMTPException, OSError) as exc:
            log.warning("job %d: mail to %s through %s:%d failed: %s", job_id, to, smtp.host, smtp.port, exc)
