"""Tests of capacity planning: fit counts, N-1, fragmentation, history, the web view."""
