"""Finding, loading and isolating plugins, then filling the registry from their hooks.

Discovery order: the core's built-in plugins, then distributions in the ``parity`` entry-point group,
then one-off modules from ``--plugin path.py`` / ``PARITY_PLUGINS``. Controls (documented in
docs/plugins/): ``PARITY_LOAD_PLUGINS`` (comma-separated allow-list of distribution or entry-point names;
empty loads no installed plugins), ``PARITY_DISABLE_PLUGINS`` (block-list), ``PARITY_STRICT_PLUGINS=1``
(a broken plugin is an error instead of a warning, for CI), ``PARITY_TRACE_PLUGINS=1`` (print hook calls).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from parity import __version__, hookspecs
from parity.errors import ParityError, PluginError, UsageError
from parity.util.record import DICT, LIST, Record, fill
from parity.util.text import warn

if TYPE_CHECKING:  # pragma: no cover
    from parity.registry import Registry

# importlib.metadata and pathlib are imported where needed: ``parity --help`` uses neither (:func:`_entry_points`
# reads the files importlib.metadata would, ~30 ms sooner: see its docstring; pathlib, with urllib.parse and
# ipaddress, ~5.5 ms). importlib.util, inspect (pluggy's) and re (click's) are imported before this module anyway.

ENTRY_POINT_GROUP = "parity"
BUILTIN_MODULES = ("parity.core_plugin",)
REGISTRATION_HOOKS = {
    "parity_register_backends": "backends",
    "parity_register_model_kinds": "model_kinds",
    "parity_register_comparators": "comparators",
    "parity_register_data_loaders": "data_loaders",
    "parity_register_debug_strategies": "strategies",
    "parity_register_executors": "executors",
    "parity_register_converters": "converters",
    "parity_register_options": "command_options",
}


class PluginInfo(Record):
    """One plugin as ``parity plugins`` shows it."""

    name: str
    distribution: str | None
    version: str | None
    source: str  # builtin | entry-point | file
    status: str  # loaded | failed | blocked
    hooks: list[str]
    items: dict[str, list[str]]
    error: str | None
    detail: str | None  # traceback of a failure

    def __init__(
        self,
        name: str,
        distribution: str | None = None,
        version: str | None = None,
        source: str = "entry-point",
        status: str = "loaded",
        hooks: list[str] = LIST,
        items: dict[str, list[str]] = DICT,
        error: str | None = None,
        detail: str | None = None,
    ) -> None:
        fill(self, locals())

    @property
    def label(self) -> str:
        return self.distribution or self.name


class PluginState(Record):
    """The loaded plugins: their manager and infos, and what their hooks registered and described (made once)."""

    manager: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    registry: Registry | None
    commands: CommandTable | None

    def __init__(self, manager: pluggy.PluginManager, infos: dict[str, PluginInfo], registry: Registry | None = None, commands: CommandTable | None = None) -> None:
        fill(self, locals())


class CommandEntry(NamedTuple):
    """One command a plugin described: ``target`` is ``"module:attr"`` (the CLI makes it a lazy command)."""

    path: str
    target: str
    help: str
    owner: str
    hidden: bool


class CommandTable:
    """What the plugins described through ``parity_describe_commands``: their groups (name -> (help, owner))
    and their commands (:class:`CommandEntry`), none of them imported."""

    def __init__(self) -> None:
        self.groups: dict[str, tuple[str, str]] = {}
        self.commands: list[CommandEntry] = []


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
        _check_unknown_hooks(_STATE)
        _STATE.registry = None
        _STATE.commands = None


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
    # historic: every plugin's parity_add_hookspecs runs as it is registered, so hooks a plugin adds exist
    # before anything calls them (implementations registered earlier are checked against them then)
    pm.hook.parity_add_hookspecs.call_historic(kwargs={"add": pm.add_hookspecs})
    return pm


def get_state() -> PluginState:
    global _STATE
    if _STATE is None:
        state = PluginState(new_manager(), {})
        for module in BUILTIN_MODULES:
            _register(state, importlib.import_module(module), PluginInfo(module, "parity", __version__, "builtin"))
        _load_entry_points(state)
        for path in [*(_env_list("PARITY_PLUGINS") or []), *_EXTRA_FILES]:
            _load_file(state, path)
        _check_unknown_hooks(state)
        _STATE = state
    return _STATE


def get_manager() -> pluggy.PluginManager:
    return get_state().manager


class EntryPoint:
    """One entry point as :func:`_entry_points` finds it (the fields of ``importlib.metadata.EntryPoint`` that
    discovery uses)."""

    def __init__(self, name: str, value: str, dist: str | None, version: str | None) -> None:
        self.name, self.value, self.dist, self.version = name, value, dist, version

    def load(self) -> Any:
        module, _, attr = self.value.partition("[")[0].strip().partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def _entry_points(group: str) -> list[EntryPoint]:
    """Entry points of ``group``, as ``importlib.metadata.entry_points(group=...)`` finds them: the
    ``entry_points.txt`` of every ``*.dist-info``/``*.egg-info`` folder in the ``sys.path`` folders, a
    distribution found twice counted once (the first on ``sys.path`` wins). Read directly, because
    importlib.metadata (importing email, zipfile, csv, ...; then a Path object and a parsed file per
    distribution) costs more than the rest of ``parity --help``: ``bench/startup.py`` times this function at
    5-8 ms and ``importlib.metadata.entry_points(group="parity")`` with each distribution's name and version at
    41-52 ms (CPU time, 2-core development machine, Python 3.11, November 2026; wall time on the idle machine:
    ~8 vs ~49 ms), so it saves 36-47 ms of every command, more than issue 27's 15 ms rule for a stand-in. A zip
    archive on sys.path is searched with importlib.metadata itself."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        folder = entry or "."
        try:
            names = sorted(os.listdir(folder))
        except (NotADirectoryError, FileNotFoundError, PermissionError):
            if os.path.isfile(folder):  # a zip archive: importlib.metadata reads those
                found.extend(_metadata_entry_points(group, folder, seen))
            continue
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            key = _normalize(name.rpartition(".")[0].partition("-")[0])
            if key in seen:
                continue
            info = os.path.join(folder, name)
            try:
                with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:  # no entry points (or a file-style egg-info)
                if os.path.isdir(info):
                    seen.add(key)
                continue
            seen.add(key)
            points = _section(text, group)
            if points:
                dist, version = _headers(info, name)
                found.extend(EntryPoint(ep_name, value, dist, version) for ep_name, value in points)
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """``name = value`` lines of ``[group]`` in an entry_points.txt (an ini file)."""
    points, current = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current == group and "=" in line:
            name, _, value = line.partition("=")
            points.append((name.strip(), value.strip()))
    return points


def _headers(info: str, folder_name: str) -> tuple[str | None, str | None]:
    """``Name`` and ``Version`` from the METADATA (or PKG-INFO) headers; the folder name if they are missing."""
    fields: dict[str, str] = {}
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info, file), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    key, sep, value = line.partition(":")
                    if sep and key in ("Name", "Version") and key not in fields:
                        fields[key] = value.strip()
            break
        except OSError:
            continue
    stem = folder_name.rpartition(".")[0]
    name, _, version = stem.partition("-")
    return fields.get("Name", name), fields.get("Version", version.partition("-")[0] or None)


def _metadata_entry_points(group: str, path: str, seen: set[str]) -> list[EntryPoint]:
    import importlib.metadata  # 30 ms at start-up: only a zip archive on sys.path needs it

    points = []
    for dist in importlib.metadata.distributions(path=[path]):
        key = _normalize(dist.metadata["Name"] or "")
        if key in seen:
            continue
        seen.add(key)
        points += [EntryPoint(ep.name, ep.value, dist.metadata["Name"], dist.version) for ep in dist.entry_points if ep.group == group]
    return points


def _selected(ep: EntryPoint, dist: str | None) -> str | None:
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
    for ep in _entry_points(ENTRY_POINT_GROUP):
        dist = ep.dist
        key = (ep.name, ep.value)
        if key in seen:  # editable installs can list a distribution twice
            continue
        seen.add(key)
        info = PluginInfo(ep.name, dist, ep.version)
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
    from pathlib import Path  # 5.5 ms at start-up: only a plugin file (--plugin, PARITY_PLUGINS) needs it

    file = Path(path)
    info = PluginInfo(file.stem, None, None, "file")
    info.name = f"file:{file}"
    if not file.is_file():
        raise UsageError(f"plugin file not found: {path}")
    try:
        spec = importlib.util.spec_from_file_location(f"parity_plugin_{file.stem}", file)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        from parity.util.scripts import no_bytecode  # only a plugin file needs it

        with no_bytecode():
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
        _refuse_impl_options(pm, plugin, info)
    except Exception as exc:
        if pm.get_plugin(info.name) is not None:
            pm.unregister(name=info.name)
        _fail(state, info, exc)
        return
    info.hooks = sorted(hc.name for hc in pm.get_hookcallers(plugin) or [])
    state.infos[info.name] = info


# hookimpl options that order or wrap other plugins' implementations: Parity calls each implementation on its
# own (to know each item's owner and isolate failures), so it refuses them instead of ignoring them
REFUSED_IMPL_OPTIONS = ("hookwrapper", "wrapper", "tryfirst", "trylast")


def _refuse_impl_options(pm: pluggy.PluginManager, plugin: Any, info: PluginInfo) -> None:
    for caller in pm.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is not plugin:
                continue
            used = [opt for opt in REFUSED_IMPL_OPTIONS if getattr(impl, opt, False)]
            if used:
                raise PluginError(
                    f"plugin {info.label}: {caller.name}: @hookimpl({used[0]}=True) is not supported "
                    "(Parity calls each plugin's implementation on its own; order between plugins is not guaranteed)"
                )


def _check_unknown_hooks(state: PluginState) -> None:
    """A plugin implementing a hook nobody declared fails (as ``pluggy``'s ``check_pending``), once every plugin
    is registered: a plugin's hooks may be declared by a plugin loaded after it (``parity_add_hookspecs``)."""
    pm = state.manager
    for name, caller in list(vars(pm.hook).items()):
        if name.startswith("_") or not isinstance(caller, pluggy.HookCaller) or caller.spec is not None:
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook or pm.get_plugin(impl.plugin_name) is None:
                continue
            info = state.infos.get(impl.plugin_name) or PluginInfo(impl.plugin_name)
            pm.unregister(name=impl.plugin_name)
            exc = PluginError(f"unknown hook '{name}' (no plugin declares it; misspelt, or a plugin it extends is not loaded)")
            _fail(state, info, exc)


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
    from parity.registry import Registry  # here: `parity --help` imports this module and never builds the registry

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


def call_hook(name: str, **kwargs: Any) -> list[Any]:
    """Call hook ``name`` (one a plugin added with ``parity_add_hookspecs``) as Parity calls its own: each
    implementation on its own, in registration order. An implementation that raises a :class:`ParityError`
    (a user error it found) stops the call; one that raises anything else is that plugin's failure, reported
    like a failure to load (a one-line warning, ``parity plugins`` shows it; an error under
    ``PARITY_STRICT_PLUGINS=1``) and not called again. Returns the results that are not ``None``; a hook no
    loaded plugin declares (its plugin is blocked, say) has none."""
    state = get_state()
    caller = getattr(state.manager.hook, name, None)
    if caller is None or caller.spec is None:
        return []
    results = []
    for impl in reversed(caller.get_hookimpls()):  # registration order, not pluggy's LIFO
        info = state.infos.get(impl.plugin_name)
        if info is not None and info.status == "failed":  # reported once; not called again
            continue
        try:
            result = _call_impl(impl, **kwargs)
        except ParityError:
            raise
        except Exception as exc:
            if info is None:
                raise
            _fail(state, info, exc)
            continue
        if result is not None:
            results.append(result)
    return results


def command_table() -> CommandTable:
    """Call every ``parity_describe_commands`` once per loaded plugin set: the groups and commands the plugins
    describe, imported by nobody yet. Two plugins describing the same command is an error naming both; a
    group may be declared by several (the first declaration's help is shown)."""
    state = get_state()
    if state.commands is not None:
        return state.commands
    table = CommandTable()
    owners: dict[str, str] = {}
    for impl in reversed(state.manager.hook.parity_describe_commands.get_hookimpls()):
        info = state.infos.get(impl.plugin_name)
        owner = info.label if info else impl.plugin_name
        described: list[tuple[str, str | None, str, bool]] = []

        def register(path: str, target: str | None = None, help: str = "", hidden: bool = False, _into: list = described) -> None:
            _into.append((" ".join(path.split()), target, help, hidden))

        try:
            _call_impl(impl, register=register)
        except Exception as exc:
            if info is None:
                raise
            _fail(state, info, exc)
            continue
        for path, target, text, hidden in described:
            if not path or (target is not None and ":" not in target):
                raise PluginError(f"{owner}: parity_describe_commands: register('{path}', '{target}', ...) needs a command path and a 'module:attr' target")
            if target is None:
                if " " in path:
                    raise PluginError(f"{owner}: parity_describe_commands: groups are top-level; '{path}' is not")
                table.groups.setdefault(path, (text, owner))
                continue
            if path in owners:
                raise PluginError(f"command 'parity {path}' is registered by both {owners[path]} and {owner}; uninstall one, or set PARITY_DISABLE_PLUGINS")
            owners[path] = owner
            table.commands.append(CommandEntry(path, target, text, owner, hidden))
    state.commands = table
    return table


def register_commands(cli: Any) -> None:
    """Let every plugin that implements ``parity_register_commands`` add its commands to ``cli`` (each time a
    command tree is built); a plugin that fails here is reported, not fatal."""
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
