"""Parity's Ray executor: ``--executor ray`` runs debug checks in long-lived Ray actors (see :mod:`parity_ray.executor`)."""

__version__ = "0.1.0"
