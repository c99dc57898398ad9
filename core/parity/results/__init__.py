"""Run results and input lists, and the files that hold them."""

from parity.results.files import load_inputs, load_results, save_inputs, save_results
from parity.results.model import IterationResult, RunResults

__all__ = ["IterationResult", "RunResults", "load_inputs", "load_results", "save_inputs", "save_results"]
