"""``fuyaoctl`` command groups beyond the core ones in ``fuyaoctl.cli``: one module per
area, each registered with one ``cli.add_command`` line at the end of ``fuyaoctl.cli``."""
