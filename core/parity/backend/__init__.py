"""Backend base classes shared by every runner plugin."""

from parity.backend.base import BaseLoader, BaseRunner, invoke_if_callable

__all__ = ["BaseLoader", "BaseRunner", "invoke_if_callable"]
