"""Settings read from the environment at import, under Polygraphy's variable names (``polygraphy.config``; an
internal module of Polygraphy, mirrored for the scripts and helpers that read it)."""

from __future__ import annotations

import os
import sys


def _flag(name: str) -> bool:
    return os.environ.get(name, "0") != "0"


INTERNAL_CORRECTNESS_CHECKS: bool = _flag("POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS")
"""Whether internal checks run (``func.constantmethod`` checks that a method left its object unchanged)."""
# Parity never installs packages while it runs: these are read so scripts that set them keep working, and ignored.
AUTOINSTALL_DEPS: bool = _flag("POLYGRAPHY_AUTOINSTALL_DEPS")
ASK_BEFORE_INSTALL: bool = _flag("POLYGRAPHY_ASK_BEFORE_INSTALL")
INSTALL_CMD: list[str] = os.environ.get("POLYGRAPHY_INSTALL_CMD", f"{sys.executable} -m pip install").split()
ARRAY_SWAP_THRESHOLD_MB: int = int(os.environ.get("POLYGRAPHY_ARRAY_SWAP_THRESHOLD_MB", "-1"))
"""Arrays larger than this many MiB are kept on disk by the comparator's results; negative: never."""
USE_TENSORRT_RTX: bool = _flag("POLYGRAPHY_USE_TENSORRT_RTX")
