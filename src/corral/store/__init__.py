"""Durable state: SQLAlchemy tables, Alembic migrations, SQLite by default, PostgreSQL by URL."""
