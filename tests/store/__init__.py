"""Tests of the hub's store (``hub.store``), run against SQLite and PostgreSQL."""
