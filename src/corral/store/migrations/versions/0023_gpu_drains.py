"""GPUs drained (by hand or by the health check), kept across restarts.

Revision ID: 0023
Revises: 0022
"""
import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpu_drains",
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("gpu_index", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("by_user", sa.String(64), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu_index"),
    )


def downgrade() -> None:
    op.drop_table("gpu_drains")
