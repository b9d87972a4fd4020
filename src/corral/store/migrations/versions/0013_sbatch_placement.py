"""Jobs keep sbatch's --begin, --deadline, --exclusive, --constraint, --nodelist, --exclude, --mail-type,
--mail-user, --time-min and --priority.

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("begin_time", sa.Float), ("deadline", sa.Float), ("features", sa.Text), ("nodelist", sa.Text),
    ("exclude", sa.Text), ("mail_type", sa.String(200)), ("mail_user", sa.Text), ("time_min_s", sa.Integer),
    ("priority", sa.BigInteger),
)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("exclusive", sa.Boolean, nullable=False, server_default=sa.false()))
    for name, kind in _COLUMNS:
        op.add_column("jobs", sa.Column(name, kind))


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.drop_column("jobs", name)
    op.drop_column("jobs", "exclusive")
