"""Jobs say which job they run again (`parent`); sweeps keep their parameters and each task's values.

Revision ID: 0018
Revises: 0017
"""
import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("parent", sa.Integer))
    op.create_table(
        "sweeps",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True,
                  autoincrement=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("seed", sa.BigInteger),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("tasks", sa.JSON, nullable=False),
        sa.Column("metric", sa.String(200)),
        sa.Column("created", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sweeps")
    op.drop_column("jobs", "parent")
