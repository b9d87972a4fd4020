"""The tables. Changing one means adding an Alembic revision under migrations/versions."""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),
    Column("user", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("reason", Text),
    Column("exit_code", Integer),
    Column("signal", Integer),
    Column("command", JSON, nullable=False),
    Column("script", Text),
    Column("script_args", JSON, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("gpu_type", String(64)),
    Column("gpu_mem_mb", Integer),
    Column("cpus", Integer, nullable=False),
    Column("mem_mb", Integer, nullable=False),
    Column("time_limit_s", Integer),
    Column("env", JSON, nullable=False),
    Column("inherit_env", Boolean, nullable=False),
    Column("labels", JSON, nullable=False),
    Column("workdir", Text, nullable=False),
    Column("submit_dir", Text, nullable=False),
    Column("stdout", Text, nullable=False),
    Column("stderr", Text),
    Column("nice", Integer, nullable=False),
    Column("submit_time", Float, nullable=False),
    Column("start_time", Float),
    Column("end_time", Float),
    Column("node", String(128)),
    Column("gpu_ids", JSON),
    Column("partition", String(64), nullable=False),
    Column("qos", String(64), nullable=False),
    Column("held", Boolean, nullable=False),
    Column("dependency", Text),
    Column("kill_on_invalid_dep", Boolean, nullable=False),
    Column("array", Text),
    Column("array_pending", Text),
    Column("array_job_id", Integer),
    Column("array_task_id", Integer),
    Index("ix_jobs_state_id", "state", "id"),
    Index("ix_jobs_array", "array_job_id", "array_task_id"),
    sqlite_autoincrement=True,
)
