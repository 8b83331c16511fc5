"""Why a task waits and where it would go: ``task explain`` and ``task submit --dry-run``.

``report.Explainer`` builds the views (``fuyao.insight``) from the live scheduler and the
active tasks; ``whatif`` finds the nearest fit with the real fit code. Nothing here writes.
"""

from hub.explain.report import Explainer

__all__ = ["Explainer"]
