"""Monitoring: job samples, alert channels, rules, firings and deliveries; where a series went NaN.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_samples",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        *(sa.Column(name, sa.Float) for name in (
            "gpu_utilization", "gpu_memory_mb", "gpu_power_w", "gpu_temperature_c", "cpu_utilization",
            "cpu_time_s", "rss_mb", "read_mb_s", "write_mb_s")),
        sa.Column("processes", sa.Integer),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_job_samples_job_time", "job_samples", ["job_id", "time"])
    op.create_index("ix_job_samples_time", "job_samples", ["time"])
    op.create_table(
        "alert_channels",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_table(
        "alert_rules",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("condition", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("scope_job", sa.Integer),
        sa.Column("scope_label", sa.String(400)),
        sa.Column("scope_user", sa.String(64)),
        sa.Column("channels", sa.JSON, nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "alert_firings",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("rule_id", sa.Integer),
        sa.Column("rule", sa.String(64), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("condition", sa.Text, nullable=False),
        sa.Column("job_id", sa.Integer),
        sa.Column("job_name", sa.String(200)),
        sa.Column("user", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("value", sa.Text),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("fired_at", sa.Float, nullable=False),
        sa.Column("resolved_at", sa.Float),
        sa.Column("acknowledged_at", sa.Float),
        sa.Column("acknowledged_by", sa.String(64)),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_alert_firings_status", "alert_firings", ["status", "id"])
    op.create_index("ix_alert_firings_job", "alert_firings", ["job_id"])
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("firing_id", sa.Integer, sa.ForeignKey("alert_firings.id", ondelete="CASCADE"), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.Float),
        sa.Column("last_error", sa.Text),
        sa.Column("sent_at", sa.Float),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_alert_deliveries_due", "alert_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_alert_deliveries_firing", "alert_deliveries", ["firing_id"])
    with op.batch_alter_table("metric_series") as batch:
        batch.add_column(sa.Column("first_nonfinite_step", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("metric_series") as batch:
        batch.drop_column("first_nonfinite_step")
    for table in ("alert_deliveries", "alert_firings", "alert_rules", "alert_channels", "job_samples"):
        op.drop_table(table)
