"""Batch scripts move out of the jobs table into job_scripts: listings never read them.

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_scripts",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True,
                  autoincrement=False),
        sa.Column("script", sa.Text, nullable=False),
    )
    # an array's tasks carried copies of the array's script: the array's row keeps the one copy
    op.execute("INSERT INTO job_scripts (job_id, script) SELECT id, script FROM jobs "
               "WHERE script IS NOT NULL AND array_job_id IS NULL")
    # a plain ALTER TABLE (SQLite 3.35+ drops a column in place): a batch copy of jobs would drop and
    # recreate the table that job_scripts now refers to
    op.drop_column("jobs", "script")


def downgrade() -> None:
    op.add_column("jobs", sa.Column("script", sa.Text))
    op.execute("UPDATE jobs SET script = (SELECT s.script FROM job_scripts s "
               "WHERE s.job_id = COALESCE(jobs.array_job_id, jobs.id))")
    op.drop_table("job_scripts")
