"""``parity inspect tactics``, ``parity inspect diff-tactics`` (and its old ``debug diff-tactics`` name)."""

from __future__ import annotations

import json

import click
from parity.cli.common import echo, verbosity_options


@click.command("tactics")
@click.argument("replay", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the replay in parity-tactics v1 JSON (converts Polygraphy files).")
@verbosity_options
def inspect_tactics(replay: str, as_json: bool) -> None:
    """Show a tactic replay file (Parity or Polygraphy) as a table."""
    from parity_tactics.render import render_replay
    from parity_tactics.replay import load_replay

    loaded = load_replay(replay)
    echo(loaded.dumps().rstrip() if as_json else render_replay(loaded))


def _diff_command(name: str, hidden: bool = False) -> click.Command:
    @click.command(name, hidden=hidden)
    @click.option(
        "--dir", "directory", type=click.Path(file_okay=False), default=None, help="Folder with good/ and bad/ replays (as debug build sorts them)."
    )
    @click.option("--good", multiple=True, type=click.Path(), help="Good replay file or folder (repeatable; overrides DIR/good).")
    @click.option("--bad", multiple=True, type=click.Path(), help="Bad replay file or folder (repeatable; overrides DIR/bad).")
    @click.option("--top", type=click.IntRange(min=0), default=20, show_default=True, help="Show this many suspects (0: all).")
    @click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
    @verbosity_options
    def diff(directory: str | None, good: tuple[str, ...], bad: tuple[str, ...], top: int, as_json: bool) -> None:
        """Find the tactics that appear in bad builds and not (or rarely) in good ones.

        Each tactic seen in a bad replay is ranked by a one-sided Fisher exact test on how many bad and good
        builds used it, so a culprit that also slipped into one good build still ranks first.
        """
        from parity.cli.common import SETTINGS

        from parity_tactics.diff import diff_tactics
        from parity_tactics.render import render_diff

        result = diff_tactics(directory, good, bad)
        if as_json:
            echo(json.dumps(result.to_json(), indent=2))
            return
        echo(render_diff(result, None if top == 0 else top))
        if SETTINGS["verbose"]:
            for path, reason in result.skipped:
                echo(f"skipped {path}: {reason}", err=True)

    return diff


inspect_diff_tactics = _diff_command("diff-tactics")
debug_diff_tactics = _diff_command("diff-tactics", hidden=True)  # Polygraphy's older spelling, used by the seeds
