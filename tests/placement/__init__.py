"""Tests of the hub's fleet view and cluster placement framework."""
