"""Tracking: projects, runs, tags, metric series and chunks, batch ids, artifacts.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uid", sa.String(64), nullable=False, unique=True),
        sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("job_id", sa.Integer),
        sa.Column("node", sa.String(128)),
        sa.Column("gpu_type", sa.String(64)),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("resume_key", sa.String(400), unique=True),
        sa.Column("start_time", sa.Float, nullable=False),
        sa.Column("end_time", sa.Float),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_runs_project", "runs", ["project_id", "id"])
    op.create_index("ix_runs_job", "runs", ["job_id"])
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tag", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "tag"),
    )
    op.create_index("ix_run_tags_tag", "run_tags", ["tag"])
    op.create_table(
        "metric_series",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.Column("first_step", sa.BigInteger, nullable=False),
        sa.Column("last_step", sa.BigInteger, nullable=False),
        sa.Column("last_value", sa.Float),
        sa.Column("last_time", sa.Float, nullable=False),
        sa.Column("min_value", sa.Float),
        sa.Column("min_step", sa.BigInteger),
        sa.Column("max_value", sa.Float),
        sa.Column("max_step", sa.BigInteger),
        sa.PrimaryKeyConstraint("run_id", "key"),
    )
    op.create_table(
        "metric_chunks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key", sa.String(250), nullable=False),
        sa.Column("first_step", sa.BigInteger, nullable=False),
        sa.Column("last_step", sa.BigInteger, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("first_value", sa.Float),
        sa.Column("first_time", sa.Float, nullable=False),
        sa.Column("last_value", sa.Float),
        sa.Column("last_time", sa.Float, nullable=False),
        sa.Column("lod2", sa.LargeBinary, nullable=False),
        sa.Column("lod1", sa.LargeBinary, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_metric_chunks_series", "metric_chunks", ["run_id", "key", "first_step"])
    if op.get_bind().dialect.name == "postgresql":
        # packed floats do not compress; trying to (TOAST's default) costs more than the write itself
        for column in ("data", "lod1", "lod2"):
            op.execute(sa.text(f"ALTER TABLE metric_chunks ALTER COLUMN {column} SET STORAGE EXTERNAL"))
    op.create_table(
        "run_batches",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "batch_id"),
    )
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("size", sa.BigInteger),
        sa.Column("sha256", sa.String(64)),
        sa.Column("step", sa.BigInteger),
        sa.Column("metric", sa.String(250)),
        sa.Column("metric_value", sa.Float),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.UniqueConstraint("run_id", "path", name="uq_artifacts_run_path"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    for table in ("artifacts", "run_batches", "metric_chunks", "metric_series", "run_tags", "runs", "projects"):
        op.drop_table(table)
