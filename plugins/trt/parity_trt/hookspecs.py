"""Hooks the TensorRT plugin declares for other plugins (added to Parity's plugin manager by
``parity_trt.hooks.parity_add_hookspecs``; documented in docs/trt.md, "Build extensions")."""

from __future__ import annotations

from parity.hookspecs import hookspec


@hookspec
def parity_trt_build_extension(options):
    """A build extension for one TensorRT build, or ``None`` when your options are not used.

    Called by: the TensorRT plugin (:func:`parity_trt.config.build_extensions`), once per engine build of
    ``parity run --trt``, ``parity convert``, ``parity debug build``, ... Implement it with
    ``@hookimpl(optionalhook=True)``, so your plugin still loads where the TensorRT plugin is not installed.
    An implementation that raises anything but a Parity error is reported like a plugin that fails to load
    and is not called again.

    :param options: every parsed option of the command (``RunnerRequest.options``), the ones your plugin
        adds with ``parity_register_options`` included.
    :return: an object with optional ``postprocess_config(builder, network, config)``,
        ``after_build(builder, network, config, engine_bytes)`` and ``build_failed(builder, network, config,
        reason)`` methods, or a plain callable used as ``postprocess_config``; or ``None``.
    """
