"""Hooks behave as documented, proved with third-party-style plugin modules (issue 13): a backend names its own
layerwise marking options, a plugin declares hooks for others (``parity_add_hookspecs``, called through
``parity.api.call_hook`` and isolated like every hook), and hookimpl options Parity cannot honour are refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def plugin_file(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def load(*paths: str) -> None:
    from parity import plugins

    plugins.add_plugin_files(list(paths))


def infos() -> dict:
    from parity import plugins

    return {info.name: info for info in plugins.plugin_infos()}


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


# --- item 1: marking options come from the backends that own them -----------------------------------

MARKING_BACKEND = """
    import click
    from parity import hookimpl
    from parity.api import Backend


    def make_runner(request):
        raise NotImplementedError


    @hookimpl
    def parity_register_backends(register):
        register(Backend("marky", make_runner, options=(click.Option(["--marky-mark"], is_flag=True),), mark_options=("marky_mark",)))
"""


def test_a_backends_mark_options_turn_on_the_layerwise_report(tmp_path, monkeypatch):
    from parity.compare.divergence import mark_params, outputs_were_marked

    monkeypatch.setenv("PARITY_LOAD_PLUGINS", "")  # the core and this one plugin only
    load(plugin_file(tmp_path, "marky", MARKING_BACKEND))
    assert mark_params() == ("marky_mark",)
    assert outputs_were_marked({"marky_mark": True})
    assert not outputs_were_marked({"marky_mark": False})
    assert not outputs_were_marked({"trt_outputs": ("mark", "all"), "onnx_outputs": ("mark", "all")})  # nobody declared them


def test_the_shipped_backends_declare_their_marking_options():
    from parity.api import get_registry
    from parity.compare.divergence import outputs_were_marked

    backends = get_registry().backends
    assert backends["onnxrt"].mark_options == ("onnx_outputs",)
    assert backends["trt"].mark_options == ("trt_outputs", "mark_debug")
    assert all(outputs_were_marked({name: ("x",)}) for name in ("onnx_outputs", "trt_outputs", "mark_debug"))
    source = (ROOT / "core" / "parity" / "compare" / "divergence.py").read_text()
    assert "trt_outputs" not in source and "MARK_PARAMS" not in source


# --- item 3: hooks a plugin declares for other plugins -------------------------------------------------

DECLARER = """
    from parity import hookimpl
    from parity.hookspecs import hookspec


    class Specs:
        @hookspec
        def parity_toy_extend(self, options):
            "What other plugins add to a toy build."


    @hookimpl
    def parity_add_hookspecs(add):
        add(Specs)
"""

EXTENDER = """
    from parity import hookimpl


    @hookimpl(optionalhook=True)
    def parity_toy_extend(options):
        return ("extended", options["size"])
"""

BROKEN_EXTENDER = """
    from parity import hookimpl
    from parity.api import UsageError


    @hookimpl(optionalhook=True)
    def parity_toy_extend(options):
        if options.get("bad_value"):
            raise UsageError("--toy-size: bad value")
        raise RuntimeError("this extension is broken on purpose")
"""


def test_a_declared_hook_is_called_isolated_and_listed(tmp_path, capsys):
    from parity.api import call_hook

    # the implementers load before the plugin that declares their hook: the order does not matter
    extender, broken = plugin_file(tmp_path, "extender", EXTENDER), plugin_file(tmp_path, "broken_extender", BROKEN_EXTENDER)
    load(extender, broken, plugin_file(tmp_path, "declarer", DECLARER))
    capsys.readouterr()
    assert call_hook("parity_toy_extend", options={"size": 3}) == [("extended", 3)]
    err = warnings_of(capsys.readouterr().err)
    assert len(err) == 1 and "plugin file:" in err[0] and "broken_extender.py failed to load and is ignored (RuntimeError: this extension is broken on purpose)" in err[0]
    assert call_hook("parity_toy_extend", options={"size": 4}) == [("extended", 4)]  # the failed one is not called again
    assert capsys.readouterr().err == ""
    rows = infos()
    assert "parity_toy_extend" in rows[f"file:{extender}"].hooks and rows[f"file:{extender}"].status == "loaded"
    assert rows[f"file:{broken}"].status == "failed"
    assert call_hook("parity_nobody_declares", options={}) == []


def test_a_user_error_from_a_declared_hook_is_the_users(tmp_path):
    from parity.api import UsageError, call_hook

    load(plugin_file(tmp_path, "declarer", DECLARER), plugin_file(tmp_path, "broken_extender", BROKEN_EXTENDER))
    with pytest.raises(UsageError, match="bad value"):
        call_hook("parity_toy_extend", options={"bad_value": True})


def test_a_failing_declared_hook_is_an_error_in_strict_mode(tmp_path, monkeypatch):
    from parity.api import PluginError, call_hook

    load(plugin_file(tmp_path, "declarer", DECLARER), plugin_file(tmp_path, "broken_extender", BROKEN_EXTENDER))
    monkeypatch.setenv("PARITY_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="broken_extender.py failed to load: RuntimeError"):
        call_hook("parity_toy_extend", options={})


def test_an_undeclared_hook_fails_only_its_plugin_unless_optional(tmp_path, capsys):
    strict_impl = EXTENDER.replace("@hookimpl(optionalhook=True)", "@hookimpl")
    wrong, optional = plugin_file(tmp_path, "wrong", strict_impl), plugin_file(tmp_path, "optional", EXTENDER)
    load(wrong, optional)
    rows = infos()
    assert rows[f"file:{optional}"].status == "loaded"
    assert rows[f"file:{wrong}"].status == "failed" and "unknown hook 'parity_toy_extend'" in rows[f"file:{wrong}"].error
    assert len(warnings_of(capsys.readouterr().err)) == 1


def test_the_trt_build_hook_reaches_third_party_extensions(tmp_path):
    pytest.importorskip("parity_trt")
    from parity_trt.config import build_extensions

    source = """
        from parity import hookimpl


        @hookimpl(optionalhook=True)
        def parity_trt_build_extension(options):
            return ("mine", options.get("level")) if options.get("level") else None
    """
    path = plugin_file(tmp_path, "my_build_ext", source)
    load(path)
    assert ("mine", 2) in build_extensions({"level": 2})
    assert not any(isinstance(ext, tuple) for ext in build_extensions({}))
    rows = infos()
    assert "parity_trt_build_extension" in rows[f"file:{path}"].hooks
    tactics = [info for info in rows.values() if info.distribution == "parity-tactics"]
    assert tactics and "parity_trt_build_extension" in tactics[0].hooks
    assert "parity_trt.build" not in (ROOT / "plugins" / "tactics" / "pyproject.toml").read_text()


# --- item 4: hookimpl options Parity cannot honour are refused ---------------------------------------

ORDERED = """
    from parity import hookimpl
    from parity.api import ComparatorSpec


    @hookimpl({option}=True)
    def parity_register_comparators(register):
        {body}
"""


@pytest.mark.parametrize("option", ["tryfirst", "trylast", "hookwrapper", "wrapper"])
def test_ordering_and_wrapping_hookimpls_are_refused(tmp_path, capsys, monkeypatch, option):
    from parity.api import PluginError

    body = "yield" if "wrapper" in option else "register(ComparatorSpec('ordered', lambda options: None))"
    path = plugin_file(tmp_path, "ordered", textwrap.dedent(ORDERED).format(option=option, body=body))
    load(path)
    row = infos()[f"file:{path}"]
    assert row.status == "failed"
    assert row.error == (
        f"PluginError: plugin file:{path}: parity_register_comparators: @hookimpl({option}=True) is not supported "
        "(Parity calls each plugin's implementation on its own; order between plugins is not guaranteed)"
    )
    from parity.api import get_registry

    assert "ordered" not in get_registry().comparators
    err = warnings_of(capsys.readouterr().err)
    assert len(err) == 1 and f"@hookimpl({option}=True) is not supported" in err[0]
    from parity import plugins

    plugins.reset()
    monkeypatch.setenv("PARITY_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=rf"parity_register_comparators: @hookimpl\({option}=True\)"):
        load(path)
        plugins.get_state()
