"""Jobs say which container image they run in, with Pyxis's companions (JSON; NULL: on the host).

Revision ID: 0017
Revises: 0016
"""
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("container", sa.Text))


def downgrade() -> None:
    op.drop_column("jobs", "container")
