"""Which jobs on a failed GPU wait again (`corral.server.gpu_faults.requeues`): Slurm's rules with JobRequeue=1."""

from dataclasses import replace

import pytest

from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.server.gpu_faults import requeues
from tests.helpers import make_spec


@pytest.mark.parametrize("requeue, interactive, waits_again", [
    (None, None, True),      # a batch job that said nothing: Slurm's default, JobRequeue=1
    (True, None, True),      # sbatch --requeue
    (False, None, False),    # sbatch --no-requeue: it ends NODE_FAIL
    (True, "pty", False),    # srun, salloc: its client has nothing to come back to
    (None, "stream", False),
])
def test_a_batch_job_waits_again_unless_it_said_no_and_an_interactive_one_never(requeue, interactive, waits_again):
    spec = replace(make_spec(requeue=requeue), interactive=interactive)
    assert requeues(Job(id=1, spec=spec, state=JobState.RUNNING, submit_time=0.0)) is waits_again
