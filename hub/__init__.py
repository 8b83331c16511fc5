"""The Fuyao hub: REST API, agent channel, fleet view, placement loop and store in one process."""
