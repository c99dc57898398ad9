"""``polygraphy.backend.common``: loaders that are not tied to one framework."""

from parity_polygraphy.backend.common.loader import (
    BytesFromPath,
    InvokeFromScript,
    SaveBytes,
    bytes_from_path,
    invoke_from_script,
    save_bytes,
)

__all__ = ["BytesFromPath", "InvokeFromScript", "SaveBytes", "bytes_from_path", "invoke_from_script", "save_bytes"]
