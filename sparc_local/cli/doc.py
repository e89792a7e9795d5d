"""Generate docs/cli.md from the Typer app, so the reference cannot drift from the code.

    python -m sparc_local.cli.doc > docs/cli.md
"""

from __future__ import annotations

import typer.main

from sparc_local.cli.app import app


def render() -> str:
    command = typer.main.get_command(app)
    lines = ["# CLI reference", "", "Generated from the Typer app by `python -m sparc_local.cli.doc > docs/cli.md`;",
             "a test fails when this file is stale.", ""]
    # the command's own Context class: typer may bring its own copy of click
    ctx = command.context_class(command, info_name="sparc-local", terminal_width=100, max_content_width=100)
    lines += ["```text", command.get_help(ctx).rstrip(), "```", ""]
    for name in sorted(command.commands):  # type: ignore[attr-defined]  # a click Group, typed as Command
        sub = command.commands[name]  # type: ignore[attr-defined]  # a click Group, typed as Command
        sub_ctx = sub.context_class(sub, info_name=name, parent=ctx, terminal_width=100, max_content_width=100)
        lines += [f"## sparc-local {name}", "", "```text", sub.get_help(sub_ctx).rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
