"""``polygraphy.backend.base``: the loader and runner base classes."""

from parity_polygraphy.backend.base.loader import BaseLoader
from parity_polygraphy.backend.base.runner import BaseRunner

__all__ = ["BaseLoader", "BaseRunner"]
