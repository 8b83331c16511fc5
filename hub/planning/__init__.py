"""Capacity planning: what fits, what-if, history and simulation (rooms of the hub)."""
