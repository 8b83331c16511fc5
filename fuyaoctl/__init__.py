"""fuyaoctl: the Python SDK (``Client``) and the CLI (``fuyaoctl``) for the Fuyao hub.

The SDK lives in ``client.py``; ``taskfile.py`` reads task YAML files; the CLI in ``cli.py``
uses only these and keeps all presentation in ``render.py``.
"""

from fuyaoctl.client import Client
from fuyaoctl.taskfile import TaskFile, parse_task_file, read_task_file

__all__ = ["Client", "TaskFile", "parse_task_file", "read_task_file"]
