"""Jobs keep sbatch's --ntasks, --ntasks-per-node and --gpus-per-task; `job_steps` holds each `srun` step
run inside a job (the batch step is the job's own row).

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("ntasks", sa.Integer, nullable=False, server_default="1"))
    op.add_column("jobs", sa.Column("ntasks_per_node", sa.Integer))
    op.add_column("jobs", sa.Column("gpus_per_task", sa.Integer))
    op.create_table(
        "job_steps",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step_id", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("ntasks", sa.Integer, nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.Integer),
        sa.Column("start_time", sa.Float, nullable=False),
        sa.Column("end_time", sa.Float),
        sa.Column("max_rss_mb", sa.Float),
        sa.Column("cpu_time_s", sa.Float),
        sa.PrimaryKeyConstraint("job_id", "step_id"),
    )


def downgrade() -> None:
    op.drop_table("job_steps")
    op.drop_column("jobs", "gpus_per_task")
    op.drop_column("jobs", "ntasks_per_node")
    op.drop_column("jobs", "ntasks")
