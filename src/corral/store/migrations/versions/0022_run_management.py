"""Runs take notes (Markdown) and may be archived.

Revision ID: 0022
Revises: 0021
"""
import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("notes", sa.Text))
    op.add_column("runs", sa.Column("archived", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("runs", "archived")
    op.drop_column("runs", "notes")
