"""Tests of fuyaoctl: the SDK and the CLI, against an in-memory fake of the hub's REST API."""
