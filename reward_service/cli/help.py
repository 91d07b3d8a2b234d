"""The command line's help pages as a newcomer reads them: each command's whole summary (click cut it at the
terminal's width with "..."), and the ``REWARD_SERVICE_*`` names every setting can be given under."""
from __future__ import annotations

import re
import textwrap

import typer.core
from typer import _click as click  # typer's own copy of click, which its commands are made of

from reward_service.settings import CONFIG_ENV, ENV_PREFIX, FLAT_NAMES


def summary(command: click.Command) -> str:
    """A command's first sentence, whole: the help page wraps it instead of cutting it short."""
    text = command.short_help or (command.help or "").strip().split("\n\n")[0]
    text = " ".join(text.split())
    first = re.match(r"(.+?[.!?])(?:\s|$)", text)
    return first.group(1) if first else text


class WholeSummaries(typer.core.TyperGroup):
    """A group whose "Commands" list gives each summary whole, wrapped under the command's name."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def settings_epilog(width: int = 78) -> str:
    """Every setting's environment name, for ``serve --help``. Lines are kept as written (click's ``\\b``)."""
    names = "  ".join(f"{ENV_PREFIX}{flat.upper()}" for flat in sorted(FLAT_NAMES))
    lines = textwrap.wrap(names, width - 2, break_on_hyphens=False)
    intro = textwrap.wrap(
        f"Settings are read from the --config file (else the file {CONFIG_ENV} names), then from the environment "
        "under these names (lists and mappings as JSON; a nested field after __, e.g. "
        "REWARD_SERVICE_SANDBOX_CAPS__WALL_S), then from the flags above. docs/operations.md#settings describes each.",
        width - 2)
    return "\b\n" + "\n".join(intro) + "\n\n\b\n" + "\n".join(lines)
