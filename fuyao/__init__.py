"""Shared core of the Fuyao federation hub.

Imported by all three programs (``hub``, ``member_agent``, ``fuyaoctl``): the error tree,
quantities, the GPU catalog, label normalization, the selector language, the API spec
models and the generated agent <-> hub wire code. It imports none of them.
"""

__version__ = "0.1.0"
