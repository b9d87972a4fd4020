"""Dashboard sessions: a credential of their own (never an API token), hashed, short-lived, ended by logging out.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("api_tokens.id"), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
        sa.Column("ended", sa.Float),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_dashboard_sessions_token_id", "dashboard_sessions", ["token_id"])
    op.create_index("ix_dashboard_sessions_expires", "dashboard_sessions", ["expires"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_expires", "dashboard_sessions")
    op.drop_index("ix_dashboard_sessions_token_id", "dashboard_sessions")
    op.drop_table("dashboard_sessions")
