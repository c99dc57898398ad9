"""``parity plugins``: what is installed, what each registered, and what failed."""

from __future__ import annotations

import json

import click

from parity.cli.common import echo
from parity.plugins import plugin_infos


def make_command() -> click.Command:
    from parity.cli.parsing import ParityCommand

    @click.command("plugins", cls=ParityCommand, short_help="List installed plugins.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.option("--all", "show_all", is_flag=True, help="Include the core's built-in plugin.")
    @click.option("--hook", default=None, help="Only plugins implementing this hook.")
    @click.option("--requirements", is_flag=True, help="Print name==version lines to reinstall the same set.")
    def plugins_command(as_json: bool, show_all: bool, hook: str | None, requirements: bool) -> int:
        """List plugins with their distribution, version, hooks and registered items.

        A plugin that failed to import is listed with its error; everything else keeps working."""
        infos = [i for i in plugin_infos() if show_all or i.source != "builtin"]
        if hook:
            infos = [i for i in infos if hook in i.hooks]
        if requirements:
            for info in infos:
                if info.distribution and info.version:
                    echo(f"{info.distribution}=={info.version}")
            return 0
        rows = [
            {
                "name": i.name,
                "distribution": i.distribution,
                "version": i.version,
                "source": i.source,
                "status": i.status,
                "hooks": i.hooks,
                "registered": i.items,
                "error": i.error,
            }
            for i in infos
        ]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return 0
        if not rows:
            echo("no plugins installed")
        for row in rows:
            head = f"{row['distribution'] or row['name']} {row['version'] or ''}".strip()
            echo(f"{head} [{row['status']}] ({row['source']}: {row['name']})")
            if row["error"]:
                echo(f"  error: {row['error']}")
            if row["hooks"]:
                echo(f"  hooks: {', '.join(row['hooks'])}")
            for kind, names in sorted(row["registered"].items()):
                echo(f"  {kind}: {', '.join(sorted(names))}")
        from parity import distributions  # here: only this listing reads the catalogue

        for member in distributions.missing():
            echo(f"not installed: {member.distribution} ({member.remedy()})")
        return 0

    return plugins_command
