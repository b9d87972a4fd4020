"""Jobs keep HTCondor's requirements (a ClassAd expression over the node and its GPUs) and the job event log.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("requirements", sa.Text))
    op.add_column("jobs", sa.Column("user_log", sa.Text))


def downgrade() -> None:
    op.drop_column("jobs", "user_log")
    op.drop_column("jobs", "requirements")
