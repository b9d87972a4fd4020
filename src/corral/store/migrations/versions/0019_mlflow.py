"""What MLflow's clients keep beyond corral's model: an experiment's lifecycle, tags and artifact location
(`mlflow_experiments`, one row per project they touched), a run's lifecycle (`mlflow_runs`) and its
key-value tags (`mlflow_run_tags`).

Revision ID: 0019
Revises: 0018
"""
import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mlflow_experiments",
        sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("lifecycle_stage", sa.String(16), nullable=False),
        sa.Column("artifact_location", sa.Text),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("last_update_time", sa.Float, nullable=False),
    )
    op.create_table(
        "mlflow_runs",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("lifecycle_stage", sa.String(16), nullable=False),
    )
    op.create_table(
        "mlflow_run_tags",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("mlflow_run_tags")
    op.drop_table("mlflow_runs")
    op.drop_table("mlflow_experiments")
