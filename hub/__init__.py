"""The Fuyao hub: REST API, agent channel, fleet view, placement loop and store in one process."""

# Before any engine module loads: compiled extensions, or their sources (hub.native).
from hub import native as native
