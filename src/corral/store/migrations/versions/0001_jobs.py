"""The jobs table.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.Integer),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("script", sa.Text),
        sa.Column("script_args", sa.JSON, nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("gpu_type", sa.String(64)),
        sa.Column("gpu_mem_mb", sa.Integer),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("mem_mb", sa.Integer, nullable=False),
        sa.Column("time_limit_s", sa.Integer),
        sa.Column("env", sa.JSON, nullable=False),
        sa.Column("inherit_env", sa.Boolean, nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("workdir", sa.Text, nullable=False),
        sa.Column("submit_dir", sa.Text, nullable=False),
        sa.Column("stdout", sa.Text, nullable=False),
        sa.Column("stderr", sa.Text),
        sa.Column("nice", sa.Integer, nullable=False),
        sa.Column("submit_time", sa.Float, nullable=False),
        sa.Column("start_time", sa.Float),
        sa.Column("end_time", sa.Float),
        sa.Column("node", sa.String(128)),
        sa.Column("gpu_ids", sa.JSON),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("qos", sa.String(64), nullable=False),
        sa.Column("held", sa.Boolean, nullable=False),
        sa.Column("dependency", sa.Text),
        sa.Column("kill_on_invalid_dep", sa.Boolean, nullable=False),
        sa.Column("array", sa.Text),
        sa.Column("array_pending", sa.Text),
        sa.Column("array_job_id", sa.Integer),
        sa.Column("array_task_id", sa.Integer),
        sa.Column("preemptible", sa.Boolean, nullable=False),
        sa.Column("warn_signal", sa.String(32)),
        sa.Column("restarts", sa.Integer, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_state_id", "jobs", ["state", "id"])
    op.create_index("ix_jobs_array", "jobs", ["array_job_id", "array_task_id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_array", "jobs")
    op.drop_index("ix_jobs_state_id", "jobs")
    op.drop_table("jobs")
