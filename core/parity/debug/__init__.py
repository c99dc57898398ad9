"""The debug iteration engine shared by every ``parity debug`` command and strategy plugin.

The whole API, for a new ``debug`` command (``debug build`` in the tactics plugin is written this way)::

    from parity.api import debug_options, echo, file_fingerprint, session_from_options, until_option

    params = [click.Argument(["model"]), until_option(), *debug_options("parity_debug.engine")]

    def build_command(model, until, **params):
        session = session_from_options(params, label="build", fingerprint={"model": file_fingerprint(model)})

        def make_artifact(iteration):            # write the file the check looks at
            build_engine(model, iteration.artifact)

        verdicts = session.repeat(make_artifact, until)   # or session.evaluate(key, make_artifact) per candidate
        echo(session.finish().line())
        return 1 if any(verdicts) else 0

The click options and :func:`session_from_options` are the CLI's (:mod:`parity.cli.debug`; plugins take them
from :mod:`parity.api`); this package is the engine, which prints nothing: it reports through a
:class:`parity.reporting.DebugReporter` (the CLI's shows progress; the default shows warnings only).

* :func:`debug_options` -- the shared flags: ``--check CMD...`` (rest of the line; none: ask at the
  terminal), ``--fail-code``, ``--ignore-fail-code``, ``--fail-regex``, ``--check-timeout`` (kills the
  check's process group), ``--show-output``/``--hide-fail-output``, ``--artifacts``/``--artifacts-dir``
  (sorted into ``good/`` and ``bad/``), ``--iter-artifact``, ``--no-remove-intermediate``,
  ``--iteration-info``, ``--state``/``--no-resume``, ``--save-debug-replay``/``--load-debug-replay``
  (:mod:`parity.debug.replay`; Polygraphy's replay files too) and ``--jobs``. :func:`until_option` adds ``--until``.
* :class:`DebugSession` -- ``evaluate(key, make_artifact) -> bad``, ``evaluate_many`` (parallel with
  ``--jobs``), ``repeat(make_artifact, until)``, ``finish() -> Summary``. Verdicts are cached per key and
  persisted in a state file, so re-running an interrupted command resumes where it stopped.
* :class:`Iteration` -- what ``make_artifact`` receives: ``index``, ``key``, ``artifact`` (write here),
  ``info`` (goes into the ``--iteration-info`` JSON), ``slot_path(name)`` for companion files.
* Checks: :class:`CommandCheck` (``parity run ...`` runs in-process), :class:`InteractiveCheck`,
  :class:`PredicateCheck` (a Python function); :class:`Verdict` holds the good/bad rules.
* Executors: :class:`SerialExecutor`, :class:`ThreadExecutor` (``--jobs N``): one method,
  ``map(fn(slot, item), items)``, so a distributed engine can replace them.
* :func:`parity.debug.report.write_debug_report` -- a command's ``--report PATH`` JSON (add the option with
  ``report_option``): every check's verdict, counts, exit code, output, time and the command's ``result``.
* Strategies (``--mode``, registered through ``parity_register_debug_strategies``) implement
  :class:`Strategy` ``minimize(items, oracle)`` against an :class:`Oracle` of index subsets.
"""

from __future__ import annotations

from parity.debug.check import CommandCheck, InteractiveCheck, Outcome, PredicateCheck, Verdict
from parity.debug.executor import Executor, SerialExecutor, ThreadExecutor, make_executor
from parity.debug.session import Candidate, DebugSession, Iteration, Summary, file_fingerprint
from parity.debug.strategy import Oracle, Strategy, subset_key

__all__ = [
    "Candidate",
    "CommandCheck",
    "DebugSession",
    "Executor",
    "InteractiveCheck",
    "Iteration",
    "Oracle",
    "Outcome",
    "PredicateCheck",
    "SerialExecutor",
    "Strategy",
    "Summary",
    "ThreadExecutor",
    "Verdict",
    "file_fingerprint",
    "make_executor",
    "subset_key",
]

