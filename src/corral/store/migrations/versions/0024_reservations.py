"""Reservations (GPUs kept for some users over a window), and the reservation a job asked for.

Revision ID: 0024
Revises: 0023
"""
import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("gpus", sa.Text, nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("mem_mb", sa.BigInteger, nullable=False),
        sa.Column("users", sa.Text, nullable=False),
        sa.Column("accounts", sa.Text, nullable=False),
        sa.Column("start_time", sa.Float, nullable=False),
        sa.Column("end_time", sa.Float, nullable=False),
        sa.Column("by_user", sa.String(64), nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.add_column("jobs", sa.Column("reservation", sa.String(64)))


def downgrade() -> None:
    op.drop_column("jobs", "reservation")
    op.drop_table("reservations")
