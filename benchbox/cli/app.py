"""The ``benchbox`` group and its error handling, which every command module shares.

The command line parses options, calls the library, renders and picks the exit code; the
commands live in :mod:`benchbox.cli.measure` (run, sweep, matrix, selfcheck, tasks, runners: the options of
run and sweep built from :data:`benchbox.run.options.OPTIONS`) and :mod:`benchbox.cli.receipts`
(show, combine, diff, export, plot, contracts, store, report). Defaults and help come from
the library's declarations; library errors name configuration fields, shown here under
the flags that set them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import click

from benchbox import __version__
from benchbox.errors import BenchboxError, FieldError, Setting, UsageError


def _flags(command: str | None) -> dict[str, str]:
    """Configuration field → the flag that sets it on ``command``: each option's parameter is named
    after the field it sets (run and sweep: :data:`benchbox.run.options.OPTIONS`)."""
    cmd = main.commands.get(command or "")
    found = {p.name: p.opts[0] for p in getattr(cmd, "params", ()) if isinstance(p, click.Option) and p.name
             and not p.name.startswith("alias__")}
    if "contracts" in found:
        found["contract"] = found["contracts"]
    return found


def _flagged(text: str, settings: Iterable[Setting], command: str | None) -> str:
    """Library wording in the command's terms: each setting ``text`` names (``field=value``, see
    :mod:`benchbox.errors`) becomes ``--flag value`` where the command has a flag for the field."""
    flags = _flags(command)
    for s in settings:
        if s.field in flags:
            text = text.replace(str(s), f"{flags[s.field]} {s.value}")
    return text


def _echo(text: Any = "", err: bool = False) -> None:
    """Print text that may carry names from receipts, contracts or tasks: control characters
    (escape sequences among them) are shown as visible escapes, never sent to the terminal."""
    from benchbox.render.common import terminal_lines

    click.echo(terminal_lines(str(text)), err=err)


def _one_line(text: str) -> str:
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def _fail(e: BenchboxError, command: str | None = None) -> NoReturn:
    interrupted = e.exit_code in (130, 143)  # SIGINT, SIGTERM
    if interrupted:
        from benchbox.run.interrupt import ignore_further_signals

        ignore_further_signals()  # exiting: a second Ctrl-C must not hit torch's exit handlers
    if e.unsaved:  # results that no write reached (a full disk): the table is where they are
        from benchbox.render import results_table

        for receipt in e.unsaved:
            _echo(results_table(receipt))
    prefix = "benchbox: " if interrupted else "benchbox: error: "
    message = str(e)
    if isinstance(e, FieldError):
        flag = _flags(command).get(e.field)
        message = f"{flag or e.field}: {e.message}"
    _echo(prefix + _one_line(_flagged(message, e.settings, command)), err=True)
    sys.exit(e.exit_code)


class _HelpGroup(click.Group):
    """Lists each command with its whole first paragraph, wrapped rather than cut."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                first = (cmd.short_help or cmd.help or "").split("\n\n")[0]
                rows.append((name, " ".join(first.split())))  # its words, not the docstring's indentation
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _Group(_HelpGroup):
    """Turns every error into one line on stderr and the right exit code, never a traceback.

    Benchbox errors carry their exit code; click's usage errors exit 2; an
    interrupt exits 130; anything unexpected exits 2 with its class and message
    (set BENCHBOX_DEBUG=1 to see the traceback instead).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BenchboxError as e:
            _fail(e, ctx.invoked_subcommand)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`benchbox show R | head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(141)
        except Exception as e:
            if os.environ.get("BENCHBOX_DEBUG"):
                raise
            _fail(UsageError(f"unexpected {type(e).__name__}: {e} "
                             "(BENCHBOX_DEBUG=1 shows the traceback)"))

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        from benchbox.run import interrupt

        interrupt.PROCESS_EXITS_ON_INTERRUPT = True  # this process ends once a run is interrupted
        try:
            self._standalone(*args, **kwargs)
        finally:  # a caller in the same process (a test's CliRunner) gets the library behaviour back
            interrupt.PROCESS_EXITS_ON_INTERRUPT = False

    def _standalone(self, *args: Any, **kwargs: Any) -> None:
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.ClickException as e:
            hint = ""
            if isinstance(e, click.UsageError) and e.ctx is not None:
                hint = f" (see '{e.ctx.command_path} --help')"
            _echo(f"benchbox: error: {_one_line(e.format_message())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            from benchbox.run.interrupt import ignore_further_signals

            ignore_further_signals()
            _echo("benchbox: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


class _Declared(click.Option):
    """An option whose default is the library's declaration, read when help or parsing needs it
    (not at import: the declaring module may be a heavy one)."""

    def __init__(self, *args: Any, declared: Callable[[], Any], **kw: Any) -> None:
        super().__init__(*args, show_default=True, **kw)
        self.declared = declared

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return self.declared()


def _declared(declaring: Callable[[], Any], name: str, shown: Callable[[Any], Any] = lambda v: v
              ) -> dict[str, Any]:
    """Keywords of an option whose default is field ``name`` of the dataclass ``declaring()``
    returns (imported only when help or parsing needs it)."""
    def read() -> Any:
        fields = {f.name: f for f in dataclasses.fields(declaring())}
        return shown(fields[name].default)

    return {"cls": _Declared, "declared": read}


def _detector() -> Any:
    from benchbox.report.changepoints import Detector
    return Detector


def _diff_default(name: str) -> dict[str, Any]:
    """An option of diff, plot or report defaulting to DiffOptions' field (the threshold in percent)."""
    def options() -> Any:
        from benchbox.receipts.diff import DiffOptions
        return DiffOptions

    return _declared(options, name,
                     (lambda v: f"{v * 100:g}%") if name == "threshold" else (lambda v: v))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="benchbox")
def main() -> None:
    """Benchmark ML inference tasks under explicit timing contracts."""


_LIST_FORMAT = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
                            show_default=True, help="table for people, json for tools.")
