"""binhist - fixed-width histograms without numpy."""

from .edges import data_range, linear_edges
from .histogram import bin_index, cumulative, histogram

__all__ = ["bin_index", "cumulative", "data_range", "histogram", "linear_edges"]
