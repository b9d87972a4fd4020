"""Jobs that share a GPU: sbatch's --gres=shard:N and the GPU memory budget (`corral.core.scheduling.sharing`).

Revision ID: 0026
Revises: 0025
"""
import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("gpu_shards", sa.Integer, nullable=False, server_default="0"))
    op.add_column("jobs", sa.Column("gpu_share_mb", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("gpu_share_mb")
        batch.drop_column("gpu_shards")
