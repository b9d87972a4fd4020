"""Jobs record the id their backend gave them (Slurm's job id), and how many nodes they span.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("backend_id", sa.String(64)))
        batch.add_column(sa.Column("nodes", sa.Integer, nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("nodes")
        batch.drop_column("backend_id")
