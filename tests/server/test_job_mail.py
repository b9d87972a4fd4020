"""sbatch's --mail-type: which mail each event sends, Slurm's subject lines, the time-limit shares, and the
mail itself through a real local SMTP server (aiosmtpd)."""

from __future__ import annotations

import pytest

from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import JobSpec
from corral.core.jobspec.states import JobState
from corral.monitor.channels.notification import SmtpSettings
from corral.server.job_mail import JobMail, duration, subject
from tests.helpers import wait_for
from tests.monitor.receivers import MailCollector, start_smtp


def job(job_id=12, state=JobState.RUNNING, mail_type=("ALL",), **fields) -> Job:
    from corral.core.jobspec.spec_slurm import mail_types

    spec = JobSpec(name="train", user="alice", command=("true",), script=None, script_args=(), gpus=0, gpu_type=None,
                   gpu_mem_mb=None, cpus=1, mem_mb=0, time_limit_s=fields.pop("time_limit_s", 3600), env={},
                   inherit_env=True, labels={}, workdir="/", submit_dir="/", stdout="x", stderr=None,
                   mail_type=mail_types(",".join(mail_type)), mail_user=fields.pop("mail_user", None))
    return Job(id=job_id, spec=spec, state=state, submit_time=1000.0, **fields)


@pytest.fixture
def relay():
    collector = MailCollector()
    controller = start_smtp(collector)
    yield collector, JobMail(SmtpSettings(host="127.0.0.1", port=controller.port, sender="slurm@lab.test",
                                          domain="lab.test"))
    controller.stop()


def subjects(collector: MailCollector, count: int) -> list[str]:
    wait_for(lambda: len(collector.envelopes) >= count, timeout=30)
    return [collector.message(i)["Subject"] for i in range(len(collector.envelopes))]


def test_durations_are_slurms():
    assert (duration(1), duration(62), duration(3723), duration(90061)) == ("00:00:01", "00:01:02", "01:02:03",
                                                                           "1-01:01:01")


def test_subjects_are_slurms():
    began = job(start_time=1001.0)
    assert subject(began, "BEGIN", 1001.0) == "Slurm Job_id=12 Name=train Began, Queued time 00:00:01"
    done = job(state=JobState.COMPLETED, start_time=1001.0, end_time=1063.0, exit_code=0)
    assert subject(done, "END", 1063.0) == "Slurm Job_id=12 Name=train Ended, Run time 00:01:02, COMPLETED, ExitCode 0"
    failed = job(state=JobState.FAILED, start_time=1001.0, end_time=1003.0, exit_code=2)
    assert subject(failed, "FAIL", 1003.0) == "Slurm Job_id=12 Name=train Failed, Run time 00:00:02, FAILED, ExitCode 2"
    assert subject(began, "TIME_LIMIT_90", 4241.0) == \
        "Slurm Job_id=12 Name=train Reached 90% of time limit, Run time 00:54:00"


def test_begin_end_and_fail_go_to_the_user_at_the_mail_domain(relay):
    collector, mail = relay
    started = job(start_time=1002.0)
    mail.started([started], 1002.0)
    started.state, started.end_time, started.exit_code = JobState.COMPLETED, 1010.0, 0
    mail.ended(started)
    failing = job(13, state=JobState.OUT_OF_MEMORY, start_time=1002.0, end_time=1005.0, exit_code=0,
                  mail_type=("FAIL",), mail_user="me@else.test")
    mail.ended(failing)
    mail.ended(job(14, state=JobState.COMPLETED, start_time=1.0, end_time=2.0, mail_type=("FAIL",)))  # no mail
    mail.close()
    assert subjects(collector, 3) == [
        "Slurm Job_id=12 Name=train Began, Queued time 00:00:02",
        "Slurm Job_id=12 Name=train Ended, Run time 00:00:08, COMPLETED, ExitCode 0",
        "Slurm Job_id=13 Name=train Failed, Run time 00:00:03, OUT_OF_MEMORY, ExitCode 0",
    ]
    assert [e.rcpt_tos for e in collector.envelopes] == [["alice@lab.test"], ["alice@lab.test"], ["me@else.test"]]


def test_end_alone_is_sent_for_a_failure_too_and_cancelled_is_an_end():
    sent: list[str] = []
    mail = JobMail(None)
    mail._send = lambda j, event, now: sent.append(f"{j.id} {event}")  # type: ignore[method-assign]
    mail.ended(job(1, state=JobState.FAILED, mail_type=("END",), start_time=1.0, end_time=2.0))
    mail.ended(job(2, state=JobState.CANCELLED, mail_type=("END", "FAIL")))
    mail.ended(job(3, state=JobState.TIMEOUT, mail_type=("TIME_LIMIT", "FAIL"), start_time=1.0, end_time=2.0))
    mail.ended(job(4, state=JobState.COMPLETED, mail_type=("END",), array_job_id=9, array_task_id=0))
    mail.ended(job(5, state=JobState.COMPLETED, mail_type=("END", "ARRAY_TASKS"), array_job_id=9, array_task_id=1))
    assert sent == ["1 END", "2 END", "3 TIME_LIMIT", "3 FAIL", "5 END"]


def test_time_limit_shares_are_sent_once_each_the_highest_reached():
    sent: list[str] = []
    mail = JobMail(None)
    mail._send = lambda j, event, now: sent.append(event)  # type: ignore[method-assign]
    running = job(start_time=1000.0, mail_type=("TIME_LIMIT_50", "TIME_LIMIT_80", "TIME_LIMIT_90"))
    mail.started([running], 1000.0)
    jobs = {running.id: running}
    for now in (1000.0 + 1700, 1000.0 + 1800, 1000.0 + 1900, 1000.0 + 3300, 1000.0 + 3500):
        mail.time_limits(jobs, now)
    assert sent == ["TIME_LIMIT_50", "TIME_LIMIT_90"]  # 80% was passed between two looks: only the highest
    mail.time_limits(jobs, 1000.0 + 3599)
    assert sent == ["TIME_LIMIT_50", "TIME_LIMIT_90"]


def test_a_requeue_is_mailed_when_asked():
    sent: list[str] = []
    mail = JobMail(None)
    mail._send = lambda j, event, now: sent.append(event)  # type: ignore[method-assign]
    mail.requeued(job(mail_type=("REQUEUE",), start_time=1.0), 5.0)
    mail.requeued(job(mail_type=("END",), start_time=1.0), 5.0)
    assert sent == ["REQUEUE"]
