"""``polygraphy.backend.pluginref``: ``PluginRefRunner``, which evaluates an onnx-graphsurgeon graph node by node
with NumPy reference implementations (``references.OP_REGISTRY``) of the ops Polygraphy's plugin references cover."""

from parity_polygraphy.backend.pluginref.runner import PluginRefRunner

__all__ = ["PluginRefRunner"]
