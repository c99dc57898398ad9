"""Node names made safe for file and graph names (no imports: the hooks module uses it during discovery)."""

from __future__ import annotations


def safe_name(name: str, limit: int = 80) -> str:
    """``name`` with every character but letters, digits, ``-``, ``_`` and ``.`` replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:limit] or "node"
