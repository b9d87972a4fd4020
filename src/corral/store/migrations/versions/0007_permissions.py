"""Permissions: alert channels shared by an admin with named users (or all); resume keys scoped per owner.

`alert_channels.owner` is who set the channel up, `shared_with` the users besides admins who may
name it in their rules (a JSON list; ["*"] for everyone; NULL for nobody). A run's resume key was
unique across all users, so one user could take the key another's job would use next; it is now
unique per (user, resume_key).

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# SQLite names the column's old UNIQUE nowhere: batch mode finds it by this convention, and
# rebuilds the table without it (migrate.upgrade turns foreign keys off, so no row of a run's
# metrics, tags or artifacts goes with the old table).
_SQLITE_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    with op.batch_alter_table("alert_channels") as batch:
        batch.add_column(sa.Column("owner", sa.String(64)))
        batch.add_column(sa.Column("shared_with", sa.JSON))
    _drop_unique("runs", "resume_key")
    op.create_index("ux_runs_user_resume_key", "runs", ["user", "resume_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_runs_user_resume_key", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.create_unique_constraint("uq_runs_resume_key", ["resume_key"])
    with op.batch_alter_table("alert_channels") as batch:
        batch.drop_column("shared_with")
        batch.drop_column("owner")


def _drop_unique(table: str, column: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        with op.batch_alter_table(table, naming_convention=_SQLITE_NAMES, recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}) as batch:
            batch.drop_constraint(f"uq_{table}_{column}", type_="unique")
        return
    for constraint in sa.inspect(bind).get_unique_constraints(table):
        if constraint["column_names"] == [column]:
            name = constraint["name"]
            if name is None:  # PostgreSQL names every constraint: one without a name cannot be dropped by it
                raise RuntimeError(f"the unique constraint on {table}.{column} has no name")
            op.drop_constraint(name, table, type_="unique")
