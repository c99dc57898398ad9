"""``polygraphy.func``: ``extend`` and ``constantmethod``."""

from parity_polygraphy.func.func import constantmethod, extend

__all__ = ["constantmethod", "extend"]
