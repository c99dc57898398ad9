"""The comparison engine: metrics, statistics and the Comparator."""
