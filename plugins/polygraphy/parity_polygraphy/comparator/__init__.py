"""``polygraphy.comparator`` on Parity's engine: ``Comparator``, ``CompareFunc``, ``PostprocessFunc``,
``DataLoader``, ``RunResults``, ``IterationResult``, ``AccuracyResult`` and the result types."""

from parity_polygraphy.comparator.comparator import *  # noqa: F403
from parity_polygraphy.comparator.compare import *  # noqa: F403
from parity_polygraphy.comparator.data_loader import *  # noqa: F403
from parity_polygraphy.comparator.postprocess import *  # noqa: F403
from parity_polygraphy.comparator.struct import *  # noqa: F403
