"""parity.testing, the pytest plugin plugins' tests use: ``invoke`` returns everything the command printed."""

from __future__ import annotations

PRINTER = """
import sys

from parity.api import hookimpl


@hookimpl
def parity_register_commands(cli):
    @cli.command("printer")
    def printer():
        print("to stdout")  # print() without flush=True: buffered in the stream invoke redirects to
        print("to stderr", file=sys.stderr)
"""


def test_invoke_returns_what_print_wrote_without_a_flush(tmp_path, parity_invoke):
    """Before, invoke read its buffers before flushing the redirected streams: a plugin's print() was lost (the
    TensorRT plugin's verbose log, which tactic tests parse, came back empty)."""
    plugin = tmp_path / "printer.py"
    plugin.write_text(PRINTER)
    assert parity_invoke("printer", env={"PARITY_PLUGINS": str(plugin)}) == (0, "to stdout\n", "to stderr\n")
