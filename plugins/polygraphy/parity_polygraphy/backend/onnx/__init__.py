"""``polygraphy.backend.onnx``: ONNX loaders (and ``util``)."""

from parity_polygraphy.backend.onnx import util
from parity_polygraphy.backend.onnx.loader import *  # noqa: F403 - the loaders and their twins, listed in loader.__all__
from parity_polygraphy.backend.onnx.loader import __all__ as _loaders

__all__ = ["util", *_loaders]
