"""A job's steps hold its CPUs and GPUs while they run: what each holds, and whether it overlaps (srun --overlap).

Revision ID: 0016
Revises: 0015
"""
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_steps", sa.Column("cpus", sa.Integer, nullable=False, server_default="0"))
    op.add_column("job_steps", sa.Column("gpu_ids", sa.JSON))
    op.add_column("job_steps", sa.Column("overlap", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("job_steps", "overlap")
    op.drop_column("job_steps", "gpu_ids")
    op.drop_column("job_steps", "cpus")
