"""Fair share's ledger: usage charged for runs that did not end their job (a preemption), kept across restarts.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_charges",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("gpu_hours", sa.Float, nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("job_id", sa.Integer),
    )
    op.create_index("ix_usage_charges_at", "usage_charges", ["at"])


def downgrade() -> None:
    op.drop_index("ix_usage_charges_at", "usage_charges")
    op.drop_table("usage_charges")
