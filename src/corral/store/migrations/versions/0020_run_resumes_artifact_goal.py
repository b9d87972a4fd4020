"""Runs count their resumptions (`run show` says Resumed); checkpoints keep the goal their metric was judged by.

Revision ID: 0020
Revises: 0019
"""
import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("resumes", sa.Integer, nullable=False, server_default="0"))
    op.add_column("artifacts", sa.Column("goal", sa.String(3)))


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("goal")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("resumes")
