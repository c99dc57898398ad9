"""The option rule: every option given takes effect or is refused (docs/cli.md, "Every option takes effect").

An option that only some part of a command reads carries its owners: ``(kind, name)`` pairs in the
attribute :data:`parity.registry.OWNER_ATTR`. The registry tags what plugins register (a backend's options
are owned by ``("backend", name)``, a metric's by ``("metric", name)``, an executor's, a converter's); the
core tags its own shared options where they are made (:mod:`parity.cli.options`: ``--atol`` belongs to the
``simple`` metric, ``--seed`` to generated inputs). Before a command's callback runs, :func:`refuse_unused`
looks at every option the user gave (click's parameter source: the command line or the environment, not a
default) and refuses, in one line and exit 2, one whose owners are all out of use: a backend owns an option
in use when one of its runners runs (or, for a core option, when it reads that option:
``Backend.mark_options``/``honours``); a metric when ``--compare-func`` names it; an executor when
``--executor`` names it. A kind the command does not choose among (``debug build`` has no backend flags: the
TensorRT options are its own) is always in use. A few options depend on another one's value
(:data:`CONDITIONS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click

from parity.errors import UsageError
from parity.plugins import get_registry
from parity.registry import OWNER_ATTR

Owner = tuple[str, str]  # (kind, name): ("backend", "trt"), ("metric", "indices"), ("data", "random")

GIVEN = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)


def owned(option: click.Option, *owners: Owner) -> click.Option:
    """Tag ``option`` with its owners and return it."""
    setattr(option, OWNER_ATTR, tuple(owners))
    return option


def owners_of(option: click.Parameter) -> tuple[Owner, ...]:
    return tuple(getattr(option, OWNER_ATTR, ()) or ())


def param_name(flag: str) -> str:
    """click's parameter name for a long flag: ``--onnx-outputs`` -> ``onnx_outputs``."""
    return flag.lstrip("-").replace("-", "_")


def _stat_is_quantile(params: Mapping[str, Any]) -> bool:
    return any(str(v).rpartition(":")[2].strip() == "quantile" for v in params.get("check_error_stat") or ())


def _loader_makes_inputs(params: Mapping[str, Any]) -> bool:
    """A registered data loader makes the inputs: not a --load-inputs file or a --data-loader-script, which give
    their own number of feeds."""
    return not params.get("load_inputs") and not params.get("data_loader_script")


_FED = "applies to inputs a data loader makes (--data-loader); --load-inputs and --data-loader-script give their own feeds"
_NONE = "; this command has none"


def _outputs_marked(params: Mapping[str, Any]) -> bool:
    from parity.from_options import outputs_were_marked  # here: only a command given --no-marking-check gets this far

    return outputs_were_marked(params)


def _marking_options() -> str:
    """What --no-marking-check applies to, in the flags of the installed backends' marking options (the core names none)."""
    from parity.from_options import mark_params  # here, as above

    flags = sorted("--" + name.replace("_", "-") for name in mark_params())
    return f"applies to outputs marked with {' or '.join(flags)}{_NONE}"


# options whose effect depends on another option's value: param -> (is it used?, what it applies to: text, or a
# function giving it where it depends on the installed plugins)
CONDITIONS: dict[str, tuple[Callable[[Mapping[str, Any]], bool], str | Callable[[], str]]] = {
    "error_quantile": (_stat_is_quantile, "applies to --check-error-stat quantile" + _NONE),
    "onnx_exclude_outputs": (
        lambda params: bool(params.get(param_name("--onnx-outputs")) or params.get(param_name("--onnx-outputs-by-type"))),
        "applies to outputs marked with --onnx-outputs or --onnx-outputs-by-type" + _NONE,
    ),
    "marking_check": (_outputs_marked, _marking_options),
    "iterations": (_loader_makes_inputs, _FED),
    "data_loader": (_loader_makes_inputs, _FED),
}


def flag_of(param: click.Parameter) -> str:
    opts = getattr(param, "opts", None) or [param.name or "?"]
    return max(opts, key=lambda o: o.startswith("--"))  # the long spelling


def given_flag(param: click.Parameter, params: Mapping[str, Any]) -> str:
    """The spelling the user gave: ``--no-marking-check`` for the off side of an on/off flag."""
    secondary = getattr(param, "secondary_opts", None)
    if secondary and params.get(param.name or "") is False:
        return max(secondary, key=lambda o: o.startswith("--"))
    return flag_of(param)


def in_use(ctx: click.Context) -> dict[str, set[str]]:
    """What this invocation uses, by kind; a kind that is absent is not chosen among by this command (all in use).
    A command may add its own (``command.parity_uses(ctx) -> {kind: names}``, e.g. ``convert``'s converter)."""
    command, params = ctx.command, ctx.params
    used: dict[str, set[str]] = {}
    flags = [p for p in command.params if getattr(p, "backend", None) and getattr(p, "count", False)]
    runners = [name for name, _ in ctx.meta.get("parity.runners", [])]
    if flags:
        used["backend"] = set(runners)
    if "compare_func" in params:
        used["metric"] = set(params.get("compare_func") or ()) or {"simple"}
        if flags and "load_outputs" in params and len(runners) == 1 and not params.get("load_outputs"):
            used["metric"] = set()  # one runner and no golden outputs: nothing is compared
    if "executor" in params:
        used["executor"] = {params.get("executor") or "local"}
    if "data_loader" in params:
        if flags and not runners:
            used["data"] = set()  # nothing runs: no inputs are made
        elif params.get("load_inputs"):
            used["data"] = {"load-inputs"}
        elif params.get("data_loader_script"):
            used["data"] = {"script"}
        else:
            used["data"] = {params.get("data_loader") or "random"}
    if "model_type" in params and "model" in params and not [p for p in command.params if getattr(p, "backend", None)]:
        used["model kind"] = _model_kind(params.get("model"), params.get("model_type"))
    extra = getattr(command, "parity_uses", None)
    if extra is not None:
        used.update({kind: set(names) for kind, names in extra(ctx).items()})
    return used


def refuse_unused(ctx: click.Context) -> None:
    """Refuse (exit 2, one line) the first option given that nothing this command runs would read."""
    command = ctx.command
    consumed = set(getattr(command, "parity_consumes", ()) or ())
    given = []
    for param in command.params:
        if not isinstance(param, click.Option) or not param.name or param.name in consumed:
            continue
        if not (owners_of(param) or param.name in CONDITIONS):
            continue
        if ctx.get_parameter_source(param.name) in GIVEN:
            given.append(param)
    if not given:
        return
    used = in_use(ctx)
    for param in given:
        owners = owners_of(param)
        if owners and not _any_used(param.name or "", owners, used):
            raise UsageError(unused_message(given_flag(param, ctx.params), param.name or "", owners, used))
        if param.name in CONDITIONS:
            applies, why = CONDITIONS[param.name]
            if not applies(ctx.params):
                raise UsageError(f"{given_flag(param, ctx.params)} {why() if callable(why) else why}")


def _model_kind(model: Any, declared: Any) -> set[str]:
    """The kind of the model a command reads (``inspect model``: a kind's options apply to that kind)."""
    if not isinstance(model, str) or not model:
        return set()
    from parity.from_options import detect_model_kind  # here: only a command given a kind's option gets this far

    kind = detect_model_kind(model, get_registry(), declared)
    return {kind} if kind else set()


def _backends() -> Mapping[str, Any]:
    return get_registry().backends


def _honouring(param: str, kinds: Mapping[str, set[str]]) -> list[str]:
    """The backends in use whose runners read the core option ``param`` (``mark_options``, ``honours``)."""
    if "backend" not in kinds:
        return []
    return [name for name, backend in _backends().items() if name in kinds["backend"] and backend.reads_option(param)]


def _any_used(param: str, owners: Sequence[Owner], used: Mapping[str, set[str]]) -> bool:
    for kind, name in owners:
        if kind == "core":  # a core option some backends read: in use when one of them runs
            if "backend" not in used or _honouring(param, used):
                return True
            continue
        if kind not in used or name in used[kind]:
            return True
    # e.g. --input-shapes with --load-inputs: TensorRT builds its profile from it
    return any(kind != "backend" for kind, _ in owners) and bool(_honouring(param, used))


def needs_text(kind: str, name: str, param: str = "") -> str:
    """What makes an owner used, in the words of the command line."""
    if kind == "backend":
        backend = _backends().get(name)
        return _runner(backend.label, backend.cli_flag) if backend is not None else _runner(name, f"--{name}")
    if kind == "core":
        readers = sorted((b for b in _backends().values() if b.reads_option(param)), key=lambda b: b.cli_flag)  # not install order: one message
        if not readers:
            return "a runner that reads it"
        return " or ".join(_runner(b.label, b.cli_flag) for b in readers)
    if kind == "metric":
        return f"the {name} metric (--compare-func {name})"
    if kind == "executor":
        return f"the {name} executor (--executor {name})"
    if kind == "converter":
        return f"the {name} converter (--convert-to {name})"
    if kind == "model kind":
        return f"{_a(name)} {name} model (--model-type {name})"
    if kind == "data":
        return "generated inputs (--data-loader random)" if name == "random" else f"the {name} data loader (--data-loader {name})"
    return f"{kind} {name}"


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _runner(label: str, flag: str) -> str:
    return f"{_a(label)} {label} runner ({flag})"


def _has_text(kind: str, names: Iterable[str]) -> str:
    names = sorted(names)
    if kind == "metric":
        return f"it compares with {', '.join(names)}" if names else "this command compares nothing (one runner: add another or --load-outputs)"
    if kind == "executor":
        return f"it uses --executor {', '.join(names)}"
    if kind == "converter":
        return f"it converts with {', '.join(names)}" if names else "it converts with none"
    if kind == "model kind":
        return f"the model is {' or '.join(f'{_a(n)} {n} model' for n in names)}" if names else "the model's kind is not known"
    if kind == "data":
        if not names:
            return "it runs no model"
        what = {"load-inputs": "--load-inputs", "script": "--data-loader-script"}
        return f"it feeds {', '.join(what.get(n, f'--data-loader {n}') for n in names)}"
    return ""


def unused_message(flag: str, param: str, owners: Sequence[Owner], used: Mapping[str, set[str]]) -> str:
    needs = list(dict.fromkeys(needs_text(kind, name, param) for kind, name in owners))
    if not any(kind == "core" for kind, _ in owners):  # and the backends that read it too (TensorRT: --input-shapes)
        needs += [_runner(b.label, b.cli_flag) for b in _backends().values() if b.reads_option(param) and _runner(b.label, b.cli_flag) not in needs]
    if all(kind in ("backend", "core") for kind, _ in owners):
        return f"{flag} applies to {' or '.join(needs)}; this command has none"
    has = next((_has_text(kind, used.get(kind, ())) for kind, _ in owners if kind not in ("backend", "core")), "")
    return f"{flag} applies to {' or '.join(needs)}; {has}" if has else f"{flag} applies to {' or '.join(needs)}"


def backend_setting_owner(backend: Any, param: click.Parameter) -> str | None:
    """Why per-runner setting ``param`` does not apply to ``backend`` (``--onnxrt=fp16=1``), or None if it does."""
    owners = owners_of(param)
    if not owners or any(kind == "backend" and name == backend.name for kind, name in owners):
        return None
    if backend.reads_option(param.name or ""):
        return None
    needs = " or ".join(dict.fromkeys(needs_text(kind, name, param.name or "") for kind, name in owners))
    return f"{backend.cli_flag}: setting '{flag_of(param).lstrip('-')}' applies to {needs}, not to {_runner(backend.label, backend.cli_flag)}"
