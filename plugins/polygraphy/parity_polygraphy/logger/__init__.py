"""``polygraphy.logger``: the global logger ``G_LOGGER`` and ``LogMode``."""

from parity_polygraphy.logger.logger import G_LOGGER, Logger, LogMode, SeverityTrie

__all__ = ["G_LOGGER", "LogMode", "Logger", "SeverityTrie"]
