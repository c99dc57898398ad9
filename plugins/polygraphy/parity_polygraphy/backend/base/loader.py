"""``BaseLoader``: Polygraphy's lazy loader. Subclasses implement ``call_impl``; calling the loader runs it."""

from __future__ import annotations

from typing import Any

from parity_polygraphy import config
from parity_polygraphy.backend.base._calls import attribute_ids, check_unchanged, wrap_impls


class BaseLoader:
    """Base class for loaders: ``loader()`` forwards its arguments to ``call_impl``.

    ``__call__`` is a constant method: with ``POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS=1`` (``config``), a
    ``call_impl`` that rebinds one of the loader's attributes raises ``PolygraphyInternalException`` (a loader
    called twice must build the same thing); as in Polygraphy, unchecked otherwise. Calling ``call_impl``
    directly logs a warning."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_impls(cls, {"call_impl": "__call__"})

    def call_impl(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("BaseLoader is an abstract class")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not config.INTERNAL_CORRECTNESS_CHECKS:
            return self.call_impl(*args, **kwargs)
        before = attribute_ids(self)
        result = self.call_impl(*args, **kwargs)
        check_unchanged(self, before, "__call__")
        return result
