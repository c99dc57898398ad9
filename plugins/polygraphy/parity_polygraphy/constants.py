"""Polygraphy's constants (``polygraphy.constants``; internal to Polygraphy, mirrored for the scripts that use
them): the JSON type markers, the default seed and shape value, the tab logs are indented with."""

from __future__ import annotations

from parity_polygraphy.config import AUTOINSTALL_DEPS, INTERNAL_CORRECTNESS_CHECKS

__all__ = ["AUTOINSTALL_DEPS", "DEFAULT_SEED", "DEFAULT_SHAPE_VALUE", "INTERNAL_CORRECTNESS_CHECKS", "LEGACY_TYPE_MARKER", "MARK_ALL", "TAB", "TYPE_MARKER"]

DEFAULT_SHAPE_VALUE = 1
DEFAULT_SEED = 1
TAB = " " * 4
MARK_ALL = "mark-all"
"""For ``ModifyOutputs``: mark every tensor as an output."""
LEGACY_TYPE_MARKER = "polygraphy_serialized_json_type"
TYPE_MARKER = "polygraphy_class"
