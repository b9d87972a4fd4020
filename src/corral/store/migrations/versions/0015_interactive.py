"""Jobs say whether srun or salloc runs them interactively (a pseudo-terminal or pipes to its client).

Revision ID: 0015
Revises: 0014
"""
import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("interactive", sa.String(8)))


def downgrade() -> None:
    op.drop_column("jobs", "interactive")
