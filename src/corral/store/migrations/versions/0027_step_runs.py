"""A job's srun steps are numbered from 0 in each of its runs, as Slurm numbers a requeued job's: `restart` is
the job's restart count when the step ran, part of the step's key.

Revision ID: 0027
Revises: 0026
"""
import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

_COLUMNS = ("job_id", "step_id", "name", "ntasks", "command", "state", "exit_code", "signal", "start_time", "cpus",
            "gpu_ids", "overlap", "end_time", "max_rss_mb", "cpu_time_s")


def _steps_table(name: str, *, runs: bool) -> None:
    op.create_table(
        name,
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        *([sa.Column("restart", sa.Integer, nullable=False, server_default="0")] if runs else []),
        sa.Column("step_id", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("ntasks", sa.Integer, nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.Integer),
        sa.Column("start_time", sa.Float, nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False, server_default="0"),
        sa.Column("gpu_ids", sa.JSON),
        sa.Column("overlap", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("end_time", sa.Float),
        sa.Column("max_rss_mb", sa.Float),
        sa.Column("cpu_time_s", sa.Float),
        sa.PrimaryKeyConstraint("job_id", *(("restart",) if runs else ()), "step_id"),
    )


def _rebuild(runs: bool, where: str = "") -> None:
    """job_steps made again with (or without) `restart` in its key: a key changes that way on SQLite and PostgreSQL."""
    _steps_table("job_steps_rebuilt", runs=runs)
    columns = ", ".join(_COLUMNS)
    op.execute(f"INSERT INTO job_steps_rebuilt ({columns}) SELECT {columns} FROM job_steps{where}")
    op.drop_table("job_steps")
    op.rename_table("job_steps_rebuilt", "job_steps")


def upgrade() -> None:
    _rebuild(runs=True)  # every step recorded so far was numbered in the job's run 0's count


def downgrade() -> None:
    _rebuild(runs=False, where=" WHERE restart = 0")  # a later run's steps would clash with run 0's numbers
