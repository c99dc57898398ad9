"""``parity data concat`` and ``parity data merge`` (alias ``to-input``): reshape saved input/output files without running anything."""

from __future__ import annotations

import click

from parity.cli.common import echo, verbosity_options
from parity.cli.parsing import ParityCommand
from parity.errors import UsageError
from parity.util.fs import atomic_write, refuse_overwrite
from parity.util.text import names_preview


def _files_command(name: str, callback, help: str) -> click.Command:
    """A data command: input/output files in, one file out (-o)."""
    return verbosity_options(ParityCommand(
        name,
        params=[click.Argument(["paths"], nargs=-1, required=True), click.Option(["-o", "--output"], required=True, type=click.Path())],
        callback=callback,
        help=help,
    ))


def make_concat_command() -> click.Command:
    return _files_command("concat", concat, "Append the iterations of several input files, or of several output files (runner by runner), into one file.")


def make_merge_command() -> click.Command:
    return _files_command(
        "merge",
        merge,
        "Merge input files and single-runner output files into one inputs file, iteration by iteration "
        "(e.g. to feed a subgraph with the tensors a full run produced: use it with --load-inputs).",
    )


def make_to_input_command() -> click.Command:
    """Polygraphy's ``data to-input``: the same merge under Polygraphy's name, so its scripts run unchanged."""
    return _files_command(
        "to-input",
        to_input,
        "Combine input files (--save-inputs) and single-runner output files (--save-outputs) into one inputs file, "
        "iteration by iteration: 'parity data merge' under Polygraphy's name, writing Polygraphy's JSON unless -o ends in .npz.",
    )


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


def to_input(paths: tuple[str, ...], output: str) -> int:
    """Polygraphy's ``to-input`` always writes its JSON (its scripts read -o with ``load_json``): so does this,
    whatever the suffix, unless -o ends in ``.npz`` (Parity's archive, as ``data merge`` writes it)."""
    return merge(paths, output, json_format=not output.lower().endswith(".npz"))


def _save_json_inputs(feeds: list[dict], output: str) -> None:
    from parity.results.files import check_output_path
    from parity.results.polygraphy import JsonWriter

    check_output_path(output)
    with atomic_write(output) as handle:
        writer = JsonWriter(handle, output, "inputs")
        try:
            for feed in feeds:
                writer.add_inputs(feed)
            writer.finish()
        except BaseException:
            writer.discard()
            raise


def merge(paths: tuple[str, ...], output: str, json_format: bool = False) -> int:
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
    (_save_json_inputs if json_format else save_inputs)(feeds, output)
    echo(f"wrote {output}: {len(feeds)} iteration(s), tensors: {names_preview(feeds[0]) if feeds else '-'}")
    return 0
