"""The hub's HTTP surfaces: the REST API (port 8848) and health/metrics (port 8851)."""

from hub.api.app import create_app, create_health_app

__all__ = ["create_app", "create_health_app"]
