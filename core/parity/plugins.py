"""Finding, loading and isolating plugins, then filling the registry from their hooks.

Discovery order: the core's built-in plugins, then distributions in the ``parity`` entry-point group,
then one-off modules from ``--plugin path.py`` / ``PARITY_PLUGINS``. Controls (documented in
docs/plugins/): ``PARITY_LOAD_PLUGINS`` (comma-separated allow-list of distribution or entry-point names;
empty loads no installed plugins), ``PARITY_DISABLE_PLUGINS`` (block-list), ``PARITY_STRICT_PLUGINS=1``
(a broken plugin is an error instead of a warning, for CI), ``PARITY_TRACE_PLUGINS=1`` (print hook calls).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from parity import hookspecs
from parity.errors import PluginError, UsageError
from parity.registry import Registry
from parity.util.text import warn

ENTRY_POINT_GROUP = "parity"
BUILTIN_MODULES = ("parity.builtin",)
REGISTRATION_HOOKS = {
    "parity_register_backends": "backends",
    "parity_register_model_kinds": "model_kinds",
    "parity_register_comparators": "comparators",
    "parity_register_data_loaders": "data_loaders",
    "parity_register_debug_strategies": "strategies",
    "parity_register_converters": "converters",
    "parity_register_options": "command_options",
}


@dataclass
class PluginInfo:
    """One plugin as ``parity plugins`` shows it."""

    name: str
    distribution: str | None = None
    version: str | None = None
    source: str = "entry-point"  # builtin | entry-point | file
    status: str = "loaded"  # loaded | failed | blocked
    hooks: list[str] = field(default_factory=list)
    items: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None
    detail: str | None = None  # traceback of a failure

    @property
    def label(self) -> str:
        return self.distribution or self.name


@dataclass
class PluginState:
    manager: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    registry: Registry | None = None


_STATE: PluginState | None = None
_EXTRA_FILES: list[str] = []


def _env_list(name: str) -> list[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def strict() -> bool:
    return os.environ.get("PARITY_STRICT_PLUGINS", "") not in ("", "0", "false")


def add_plugin_files(paths: Iterable[str]) -> None:
    """Queue one-off plugin modules (``--plugin``); must happen before the first :func:`get_state`."""
    for path in paths:
        if path not in _EXTRA_FILES:
            _EXTRA_FILES.append(path)
    if _STATE is not None:
        for path in paths:
            _load_file(_STATE, path)
        _STATE.registry = None


def reset() -> None:
    """Forget loaded plugins (tests, and the in-process debug checks use this)."""
    global _STATE
    _STATE = None
    _EXTRA_FILES.clear()


def new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get("PARITY_TRACE_PLUGINS"):
        pm.trace.root.setwriter(lambda text: print(text, end="", file=sys.stderr))
        pm.enable_tracing()
    return pm


def get_state() -> PluginState:
    global _STATE
    if _STATE is None:
        state = PluginState(new_manager(), {})
        for module in BUILTIN_MODULES:
            _register(state, importlib.import_module(module), PluginInfo(module, "parity", _version("parity"), "builtin"))
        _load_entry_points(state)
        for path in [*(_env_list("PARITY_PLUGINS") or []), *_EXTRA_FILES]:
            _load_file(state, path)
        _STATE = state
    return _STATE


def get_manager() -> pluggy.PluginManager:
    return get_state().manager


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _selected(ep: importlib.metadata.EntryPoint, dist: str | None) -> str | None:
    """Why an entry point is skipped (``None`` if it loads)."""
    names = {ep.name, *([dist] if dist else [])}
    allow = _env_list("PARITY_LOAD_PLUGINS")
    if allow is not None and not names & set(allow):
        return "not in PARITY_LOAD_PLUGINS"
    block = _env_list("PARITY_DISABLE_PLUGINS") or []
    if names & set(block):
        return "blocked by PARITY_DISABLE_PLUGINS"
    return None


def _load_entry_points(state: PluginState) -> None:
    seen: set[tuple[str, str]] = set()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        key = (ep.name, ep.value)
        if key in seen:  # editable installs can list a distribution twice
            continue
        seen.add(key)
        info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist is not None else None)
        reason = _selected(ep, dist)
        if reason:
            info.status, info.error = "blocked", reason
            state.infos[info.name] = info
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # isolate: one broken plugin must not break the CLI
            _fail(state, info, exc)
            continue
        _register(state, plugin, info)


def _load_file(state: PluginState, path: str) -> None:
    file = Path(path)
    info = PluginInfo(file.stem, None, None, "file")
    info.name = f"file:{file}"
    if not file.is_file():
        raise UsageError(f"plugin file not found: {path}")
    try:
        spec = importlib.util.spec_from_file_location(f"parity_plugin_{file.stem}", file)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:
        _fail(state, info, exc)
        return
    _register(state, module, info)


def _register(state: PluginState, plugin: Any, info: PluginInfo) -> None:
    pm = state.manager
    try:
        if pm.is_registered(plugin):
            return
        pm.register(plugin, name=info.name)
        pm.check_pending()
    except Exception as exc:
        if pm.get_plugin(info.name) is not None:
            pm.unregister(name=info.name)
        _fail(state, info, exc)
        return
    info.hooks = sorted(hc.name for hc in pm.get_hookcallers(plugin) or [])
    state.infos[info.name] = info


def _fail(state: PluginState, info: PluginInfo, exc: BaseException) -> None:
    info.status = "failed"
    info.error = f"{type(exc).__name__}: {exc}"
    info.detail = traceback.format_exc()
    state.infos[info.name] = info
    if strict():
        raise PluginError(f"plugin {info.label} failed to load: {info.error}") from exc
    warn(f"plugin {info.label} failed to load and is ignored ({info.error}); see 'parity plugins'")


def _call_impl(impl: pluggy.HookImpl, **kwargs: Any) -> Any:
    # called directly (to know each item's owner), so pluggy's own tracing never sees these calls
    if os.environ.get("PARITY_TRACE_PLUGINS"):
        print(f"parity: trace: {impl.plugin_name}: {impl.function.__name__}({', '.join(impl.argnames)})", file=sys.stderr)
    return impl.function(**{name: kwargs[name] for name in impl.argnames})


def get_registry() -> Registry:
    """Call every registration hook once, plugin by plugin, so collisions name both owners."""
    state = get_state()
    if state.registry is not None:
        return state.registry
    registry = Registry()
    for hook_name, kind in REGISTRATION_HOOKS.items():
        caller = getattr(state.manager.hook, hook_name)
        for impl in reversed(caller.get_hookimpls()):  # registration order, not pluggy's LIFO
            info = state.infos.get(impl.plugin_name)
            owner = info.label if info else impl.plugin_name

            def register(item: Any, _kind: str = kind, _owner: str = owner) -> None:
                registry.add(_kind, item, _owner)

            try:
                _call_impl(impl, register=register)
            except PluginError:
                raise
            except Exception as exc:
                if info is None:
                    raise
                _fail(state, info, exc)
    for info in state.infos.values():
        info.items = registry.items_of(info.label)
    state.registry = registry
    return registry


def register_commands(cli: Any) -> None:
    """Let every plugin add CLI commands; a plugin that fails here is reported, not fatal."""
    state = get_state()
    for impl in reversed(state.manager.hook.parity_register_commands.get_hookimpls()):
        try:
            _call_impl(impl, cli=cli)
        except Exception as exc:
            info = state.infos.get(impl.plugin_name)
            if info is None:
                raise
            _fail(state, info, exc)


def plugin_infos() -> list[PluginInfo]:
    get_registry()
    return list(get_state().infos.values())


def module_available(name: str) -> bool:
    """Whether ``name`` could be imported, without importing it (an already imported module counts, even one
    made at run time without a spec, which ``find_spec`` refuses with ValueError)."""
    if sys.modules.get(name) is not None:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def hook_signatures() -> dict[str, str]:
    """``name(args)`` of every hook spec (the docs meta-test checks these appear in docs/)."""
    result = {}
    for name, obj in vars(hookspecs).items():
        if name.startswith("parity_") and callable(obj):
            result[name] = f"{name}{inspect.signature(obj)}"
    return result


def loaded_modules() -> list[ModuleType]:
    return [p for p in get_manager().get_plugins() if isinstance(p, ModuleType)]
