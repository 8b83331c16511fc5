"""``python -m fuyaoctl``: the same as the ``fuyaoctl`` console script."""

from fuyaoctl.cli import main

main()
