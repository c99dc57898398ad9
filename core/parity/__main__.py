"""``python -m parity``: the same as the ``parity`` command (handy in virtual environments and tests)."""

from parity.cli import main

main()
