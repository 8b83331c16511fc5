"""Helpers shared by test packages: real servers started for tests (PostgreSQL)."""
