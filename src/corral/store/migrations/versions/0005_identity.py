"""Identity: API tokens (hashed, scoped, expiring), and each job's account and umask.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("account", sa.String(64)))
        batch.add_column(sa.Column("umask", sa.Integer))
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
        sa.Column("revoked", sa.Float),
        sa.Column("created_by", sa.String(64), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_api_tokens_user", "api_tokens", ["user"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_user", "api_tokens")
    op.drop_table("api_tokens")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("umask")
        batch.drop_column("account")
