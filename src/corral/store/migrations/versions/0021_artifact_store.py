"""Artifacts uploaded to the server's store (content-addressed by sha256) beside those only registered;
logged images' captions.

Revision ID: 0021
Revises: 0020
"""
import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("artifacts", sa.Column("stored", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("artifacts", sa.Column("caption", sa.Text))
    op.create_index("ix_artifacts_sha256", "artifacts", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_artifacts_sha256", "artifacts")
    op.drop_column("artifacts", "caption")
    op.drop_column("artifacts", "stored")
