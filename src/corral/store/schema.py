"""The tables. Changing one means adding an Alembic revision under migrations/versions."""

from __future__ import annotations

from sqlalchemy import (
    DDL, JSON, BigInteger, Boolean, Column, Float, ForeignKey, Index, Integer, LargeBinary, MetaData,
    PrimaryKeyConstraint, String, Table, Text, UniqueConstraint, event, false,
)

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
    Column("preemptible", Boolean, nullable=False),
    Column("requeue", Boolean),  # sbatch --requeue / --no-requeue; NULL: not said (Slurm's default)
    Column("warn_signal", String(32)),
    Column("restarts", Integer, nullable=False),
    Column("backend_id", String(64)),
    Column("nodes", Integer, nullable=False, server_default="1"),
    Column("account", String(64)),
    Column("umask", Integer),
    Column("requirements", Text),
    Column("user_log", Text),
    Column("open_mode", String(8), nullable=False, server_default="truncate"),
    Column("comment", Text),
    Column("begin_time", Float),
    Column("deadline", Float),
    Column("exclusive", Boolean, nullable=False, server_default=false()),
    Column("features", Text),
    Column("nodelist", Text),
    Column("exclude", Text),
    Column("mail_type", String(200)),
    Column("mail_user", Text),
    Column("time_min_s", Integer),
    Column("priority", BigInteger),
    Column("interactive", String(8)),
    Column("ntasks", Integer, nullable=False, server_default="1"),
    Column("ntasks_per_node", Integer),
    Column("gpus_per_task", Integer),
    # the ContainerSpec as JSON text (NULL: on the host): read only whole, with its job
    Column("container", Text),
    # the job this one runs again (`corral resubmit`); no foreign key: a parent may be purged before its reruns
    Column("parent", Integer),
    # sbatch's --reservation: the reservation it runs in (a name; the reservation may be gone)
    Column("reservation", String(64)),
    # a sharing job's (`corral.core.scheduling.sharing`): sbatch's --gres=shard:N, and its GPU memory budget in MB
    Column("gpu_shards", Integer, nullable=False, server_default="0"),
    Column("gpu_share_mb", Integer, nullable=False, server_default="0"),
    Index("ix_jobs_state_id", "state", "id"),
    Index("ix_jobs_array", "array_job_id", "array_task_id"),
    sqlite_autoincrement=True,
)

# Batch scripts (up to [server] max_script_mb each) live apart from the rows that listings read;
# an array's tasks share the array's row.
job_scripts = Table(
    "job_scripts",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
    Column("script", Text, nullable=False),
)

# What a job's row forgets when it is queued again (`corral.core.jobspec.events`): each start, preemption (and for
# which job), requeue, and who cancelled it; written in the same transaction as the change of state.
job_events = Table(
    "job_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("time", Float, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("detail", JSON, nullable=False),
    Index("ix_job_events_job", "job_id", "time"),
)

# Each `srun` step run inside a job (`corral.cli.slurm.step`), numbered from 0 in each run of the job as Slurm
# numbers them; the batch step is the job's own row. A step still RUNNING when its run ends is CANCELLED then.
job_steps = Table(
    "job_steps",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("restart", Integer, nullable=False, server_default="0"),  # the job's restart count in the run it ran in
    Column("step_id", Integer, nullable=False),
    Column("name", String(200), nullable=False),
    Column("ntasks", Integer, nullable=False),
    Column("command", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("exit_code", Integer),
    Column("signal", Integer),
    Column("start_time", Float, nullable=False),
    Column("cpus", Integer, nullable=False, server_default="0"),
    Column("gpu_ids", JSON),
    Column("overlap", Boolean, nullable=False, server_default=false()),
    Column("end_time", Float),
    Column("max_rss_mb", Float),
    Column("cpu_time_s", Float),
    PrimaryKeyConstraint("job_id", "restart", "step_id"),
)

usage_charges = Table(
    "usage_charges",  # fair share's ledger: usage of runs that did not end their job (preempted, requeued)
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user", String(64), nullable=False),
    Column("gpu_hours", Float, nullable=False),
    Column("at", Float, nullable=False),
    Column("job_id", Integer),
    Index("ix_usage_charges_at", "at"),
)


# A sweep (`corral sweep`): the array job it runs as, its parameters, and each task's values, so that
# `sweep show` knows what every task ran with. Keyed by the array's job id: one id names both.
sweeps = Table(
    "sweeps",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
    Column("user", String(64), nullable=False),
    Column("method", String(16), nullable=False),
    Column("seed", BigInteger),
    Column("params", JSON, nullable=False),
    Column("command", JSON, nullable=False),
    Column("tasks", JSON, nullable=False),
    Column("metric", String(200)),
    Column("created", Float, nullable=False),
)


# -- tracking -------------------------------------------------------------------------------------

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created", Float, nullable=False),
    sqlite_autoincrement=True,
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uid", String(64), nullable=False, unique=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("user", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("config", JSON, nullable=False),
    Column("tags", JSON, nullable=False),
    Column("job_id", Integer),
    Column("node", String(128)),
    Column("gpu_type", String(64)),
    Column("git_commit", String(64)),
    Column("resume_key", String(400)),
    Column("start_time", Float, nullable=False),
    Column("end_time", Float),
    Column("resumes", Integer, nullable=False, server_default="0"),  # times a requeued job took it up again
    Column("notes", Text),  # Markdown, the owner's; rendered as text on the dashboard
    Column("archived", Boolean, nullable=False, server_default=false()),  # hidden from listings, kept
    Index("ix_runs_project", "project_id", "id"),
    Index("ix_runs_job", "job_id"),
    Index("ux_runs_user_resume_key", "user", "resume_key", unique=True),  # a resume key is its owner's alone
    sqlite_autoincrement=True,
)

run_tags = Table(
    "run_tags",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("tag", String(200), nullable=False),
    PrimaryKeyConstraint("run_id", "tag"),
    Index("ix_run_tags_tag", "tag"),
)

# One row per (run, key): where the series ends (steps only increase per key) and its summary.
metric_series = Table(
    "metric_series",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(250), nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("first_step", BigInteger, nullable=False),
    Column("last_step", BigInteger, nullable=False),
    Column("last_value", Float),
    Column("last_time", Float, nullable=False),
    Column("min_value", Float),
    Column("min_step", BigInteger),
    Column("max_value", Float),
    Column("max_step", BigInteger),
    Column("first_nonfinite_step", BigInteger),  # where it first went NaN or infinite: alerts and diagnosis
    PrimaryKeyConstraint("run_id", "key"),
)

# Append-only chunks of a series, in step order and never overlapping. The small columns and the
# two levels of min/max summaries come before the raw arrays, so that a downsampled read of a
# long series never touches the raw data of the chunks it covers whole.
metric_chunks = Table(
    "metric_chunks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(250), nullable=False),
    Column("first_step", BigInteger, nullable=False),
    Column("last_step", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
    Column("first_value", Float),
    Column("first_time", Float, nullable=False),
    Column("last_value", Float),
    Column("last_time", Float, nullable=False),
    Column("lod2", LargeBinary, nullable=False),
    Column("lod1", LargeBinary, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Index("ix_metric_chunks_series", "run_id", "key", "first_step"),
    sqlite_autoincrement=True,
)

# Packed floats do not compress; trying to (TOAST's default) costs more than the write itself.
# Revision 0002 does the same to a migrated database.
event.listen(metric_chunks, "after_create", DDL(
    "ALTER TABLE metric_chunks ALTER COLUMN data SET STORAGE EXTERNAL, ALTER COLUMN lod1 SET STORAGE EXTERNAL, "
    "ALTER COLUMN lod2 SET STORAGE EXTERNAL").execute_if(dialect="postgresql"))

# Batch ids already applied to a run: a retried batch is acknowledged and not applied twice.
run_batches = Table(
    "run_batches",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("batch_id", String(64), nullable=False),
    PrimaryKeyConstraint("run_id", "batch_id"),
)

artifacts = Table(
    "artifacts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("path", Text, nullable=False),
    Column("type", String(32), nullable=False),
    Column("size", BigInteger),
    Column("sha256", String(64)),
    Column("step", BigInteger),
    Column("metric", String(250)),
    Column("metric_value", Float),
    Column("goal", String(3)),  # "min" or "max": which metric_value is best, as the run declared it (best_mode)
    Column("deleted", Boolean, nullable=False),
    Column("created", Float, nullable=False),
    # True: the bytes are in the artifact store under sha256 (uploaded); False: registered where the
    # job wrote them (checkpoints), read from there on demand
    Column("stored", Boolean, nullable=False, server_default=false()),
    Column("caption", Text),  # a logged image's caption
    UniqueConstraint("run_id", "path", name="uq_artifacts_run_path"),
    Index("ix_artifacts_sha256", "sha256"),  # is a blob still linked anywhere (dedup, deletion)
    sqlite_autoincrement=True,
)

# What MLflow's clients keep that corral's own model has no place for (corral.tracking.compat.mlflow_tracking):
# an experiment is a project, a run a run; these hold MLflow's lifecycle (a soft delete), an
# experiment's tags and artifact location, and a run's key-value tags.
mlflow_experiments = Table(
    "mlflow_experiments",
    metadata,
    Column("project_id", Integer, ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
    Column("lifecycle_stage", String(16), nullable=False),
    Column("artifact_location", Text),
    Column("tags", JSON, nullable=False),
    Column("last_update_time", Float, nullable=False),
)

mlflow_runs = Table(
    "mlflow_runs",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("lifecycle_stage", String(16), nullable=False),
)

mlflow_run_tags = Table(
    "mlflow_run_tags",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(250), nullable=False),
    Column("value", Text, nullable=False),
    PrimaryKeyConstraint("run_id", "key"),
)


# -- monitoring -----------------------------------------------------------------------------------

# One row per job per sampling tick: the job's system metrics (see corral.monitor.sampling).
job_samples = Table(
    "job_samples",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, nullable=False),
    Column("time", Float, nullable=False),
    Column("gpu_utilization", Float),
    Column("gpu_memory_mb", Float),
    Column("gpu_power_w", Float),
    Column("gpu_temperature_c", Float),
    Column("cpu_utilization", Float),
    Column("cpu_time_s", Float),
    Column("rss_mb", Float),
    Column("read_mb_s", Float),
    Column("write_mb_s", Float),
    Column("processes", Integer),
    Index("ix_job_samples_job_time", "job_id", "time"),
    Index("ix_job_samples_time", "time"),  # pruning the oldest
    sqlite_autoincrement=True,
)

alert_channels = Table(
    "alert_channels",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("type", String(16), nullable=False),
    Column("config", JSON, nullable=False),
    Column("created", Float, nullable=False),
    Column("owner", String(64)),  # the admin who set it up (None: made before 0007)
    Column("shared_with", JSON),  # who else may name it in a rule: user names, ["*"] for all; None: nobody
)

alert_rules = Table(
    "alert_rules",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("severity", String(16), nullable=False),
    Column("condition", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("scope_job", Integer),
    Column("scope_label", String(400)),
    Column("scope_user", String(64)),
    Column("channels", JSON, nullable=False),
    Column("owner", String(64), nullable=False),
    Column("created", Float, nullable=False),
    sqlite_autoincrement=True,
)

# A firing outlives its rule: the history keeps the rule's name and severity as they were.
alert_firings = Table(
    "alert_firings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("rule_id", Integer),
    Column("rule", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("condition", Text, nullable=False),
    Column("job_id", Integer),
    Column("job_name", String(200)),
    Column("user", String(64)),
    Column("status", String(16), nullable=False),
    Column("value", Text),
    Column("message", Text, nullable=False),
    Column("fired_at", Float, nullable=False),
    Column("resolved_at", Float),
    Column("acknowledged_at", Float),
    Column("acknowledged_by", String(64)),
    Index("ix_alert_firings_status", "status", "id"),
    Index("ix_alert_firings_job", "job_id"),
    sqlite_autoincrement=True,
)

# Each notification to each channel, kept until sent or given up: retried after a restart too.
alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("firing_id", Integer, ForeignKey("alert_firings.id", ondelete="CASCADE"), nullable=False),
    Column("channel", String(64), nullable=False),
    Column("event", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Float),
    Column("last_error", Text),
    Column("sent_at", Float),
    Index("ix_alert_deliveries_due", "status", "next_attempt_at"),
    Index("ix_alert_deliveries_firing", "firing_id"),
    sqlite_autoincrement=True,
)

# -- identity -------------------------------------------------------------------------------------

# API tokens for callers the kernel cannot name (another machine, a browser elsewhere, an agent).
# Only a hash of each secret is kept: a leaked database grants nothing.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user", String(64), nullable=False),
    Column("name", String(64), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("created", Float, nullable=False),
    Column("expires", Float, nullable=False),
    Column("revoked", Float),
    Column("created_by", String(64), nullable=False),
    Index("ix_api_tokens_user", "user"),
    sqlite_autoincrement=True,
)

# The dashboard's login sessions (corral.core.access.sessions): only the hash of cookie and key together.
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user", String(64), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("token_id", Integer, ForeignKey("api_tokens.id"), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("created", Float, nullable=False),
    Column("expires", Float, nullable=False),
    Column("ended", Float),
    Index("ix_dashboard_sessions_token_id", "token_id"),
    Index("ix_dashboard_sessions_expires", "expires"),
    sqlite_autoincrement=True,
)

# -- the machine ----------------------------------------------------------------------------------

# GPUs an admin (or the health check) took out of scheduling: no new job lands on one until it is resumed.
gpu_drains = Table(
    "gpu_drains",
    metadata,
    Column("node", String(200), nullable=False),
    Column("gpu_index", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    Column("by_user", String(64), nullable=False),
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("node", "gpu_index"),
)

# Reservations (`corral.core.scheduling.reservations`): GPUs of a node kept for some users or accounts over a window.
# Lists are stored comma-joined (GPU indexes, users, accounts: names never hold a comma).
reservations = Table(
    "reservations",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("node", String(200), nullable=False),
    Column("gpus", Text, nullable=False),
    Column("cpus", Integer, nullable=False),
    Column("mem_mb", BigInteger, nullable=False),
    Column("users", Text, nullable=False),
    Column("accounts", Text, nullable=False),
    Column("start_time", Float, nullable=False),
    Column("end_time", Float, nullable=False),
    Column("by_user", String(64), nullable=False),
    Column("created", Float, nullable=False),
)
