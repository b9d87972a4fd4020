"""Jobs keep sbatch's --open-mode (append keeps what the log files hold) and --comment.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("open_mode", sa.String(8), nullable=False, server_default="truncate"))
    op.add_column("jobs", sa.Column("comment", sa.Text))


def downgrade() -> None:
    op.drop_column("jobs", "comment")
    op.drop_column("jobs", "open_mode")
