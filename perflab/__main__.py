"""``python -m perflab``: the ``perflab`` command."""

from perflab.cli import main

main()
