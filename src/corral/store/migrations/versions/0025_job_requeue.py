"""A job's sbatch --requeue / --no-requeue: whether it waits again when its GPU fails (NULL: not said).

Revision ID: 0025
Revises: 0023 (0024 once the reservations' migration is merged before it)
"""
import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("requeue", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("requeue")
