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


def test_parity_main_keeps_the_plugins_a_test_loaded(tmp_path, parity_main, monkeypatch):
    """parity_main (tests/conftest.py's ``main``) runs ``parity`` through capsys and returns a CliResult."""
    plugin = tmp_path / "printer.py"
    plugin.write_text(PRINTER)
    monkeypatch.setenv("PARITY_PLUGINS", str(plugin))
    result = parity_main("printer")
    assert result == (0, "to stdout\n", "to stderr\n")
    assert result.exit_code == 0
    assert parity_main("no-such-command").exit_code == 2


def test_parity_fresh_plugins_loads_them_anew_and_resets_verbosity(parity_fresh_plugins, parity_main):
    from parity import plugins
    from parity.cli.common import SETTINGS

    assert SETTINGS["verbose"] is False and SETTINGS["quiet"] is False
    state = plugins.get_state()
    assert plugins.get_state() is state  # kept within the test
    SETTINGS.update(verbose=True)  # what a -v run would leave behind


def test_the_next_test_starts_afresh():
    """Runs after the one above (pytest keeps a file's order): the autouse fixture of tests/conftest.py, which is
    parity_fresh_plugins, put verbosity back and dropped the plugins that test loaded."""
    from parity import plugins
    from parity.cli.common import SETTINGS

    assert SETTINGS["verbose"] is False
    assert plugins._STATE is None
