"""``parity data concat`` and ``parity data merge``: reshape saved input/output files without running anything."""

from __future__ import annotations

import click

from parity.cli.common import echo, verbosity_options
from parity.cli.parsing import ParityCommand
from parity.errors import UsageError
from parity.util.fs import refuse_overwrite
from parity.util.text import names_preview


def make_concat_command() -> click.Command:
    return verbosity_options(ParityCommand(
        "concat",
        params=[click.Argument(["paths"], nargs=-1, required=True), click.Option(["-o", "--output"], required=True, type=click.Path())],
        callback=concat,
        help="Append the iterations of several input files, or of several output files (runner by runner), into one file.",
    ))


def make_merge_command() -> click.Command:
    return verbosity_options(ParityCommand(
        "merge",
        params=[click.Argument(["paths"], nargs=-1, required=True), click.Option(["-o", "--output"], required=True, type=click.Path())],
        callback=merge,
        help="Merge input files and single-runner output files into one inputs file, iteration by iteration "
        "(e.g. to feed a subgraph with the tensors a full run produced: use it with --load-inputs).",
    ))


def concat(paths: tuple[str, ...], output: str) -> int:
    from parity.results.files import file_kind, load_inputs, load_results, save_inputs, save_results
    from parity.results.model import RunResults

    refuse_overwrite({"the input file": paths}, **{"-o": output})  # before reading anything
    kinds = {file_kind(p) for p in paths}
    if len(kinds) != 1:
        raise UsageError("data concat: give only input files or only output files")
    if kinds == {"inputs"}:
        feeds = [feed for p in paths for feed in load_inputs(p)]
        save_inputs(feeds, output)
        echo(f"wrote {output}: {len(feeds)} iteration(s) of inputs")
        return 0
    merged = RunResults()
    for p in paths:
        for runner, iterations in load_results(p):
            for it in iterations:
                merged.append_iteration(runner, it)
    save_results(merged, output)
    echo(f"wrote {output}: " + ", ".join(f"{r}: {len(i)} iteration(s)" for r, i in merged))
    return 0


def merge(paths: tuple[str, ...], output: str) -> int:
    from parity.results.files import file_kind, load_inputs, load_results, save_inputs

    refuse_overwrite({"the input file": paths}, **{"-o": output})  # before reading anything
    sources: list[list[dict]] = []
    for p in paths:
        if file_kind(p) == "inputs":
            sources.append(load_inputs(p))
            continue
        runs = load_results(p).items()
        if len(runs) != 1:
            raise UsageError(f"data merge: {p} holds {len(runs)} runners; merge needs single-runner output files")
        sources.append([dict(it) for it in runs[0][1]])
    counts = {len(s) for s in sources}
    if len(counts) != 1:
        raise UsageError(f"data merge: the files hold different numbers of iterations ({sorted(counts)})")
    feeds = []
    for index in range(counts.pop()):
        feed: dict = {}
        for source in sources:
            feed.update(source[index])  # later files win on name clashes, as listed
        feeds.append(feed)
    save_inputs(feeds, output)
    echo(f"wrote {output}: {len(feeds)} iteration(s), tensors: {names_preview(feeds[0]) if feeds else '-'}")
    return 0
