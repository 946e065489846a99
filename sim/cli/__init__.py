"""``simrun``: the command line, a thin layer over the Python API (SPEC §2).

This package is the only place that parses arguments, prints, or exits. Each sub-command lives in its own
module and exposes a ``click`` command named ``command``; this module wires them into one group, makes
``simrun --trace T --topo X`` mean ``simrun run --trace T --topo X``, and turns every bad-input error into
one ``simrun: error: ...`` line with exit code 2 (SPEC §2). Unexpected failures exit 1.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import traceback

import click

#: sub-command name -> module (each module defines ``command``); imported only when used.
SUBCOMMANDS: dict[str, str] = {
    "run": "sim.cli.run",
    "ingest": "sim.cli.ingest",
    "synth": "sim.cli.synth",
    "analyze": "sim.cli.analyze",
    "sweep": "sim.cli.sweep",
    "topo": "sim.cli.topo",
    "flows": "sim.cli.flows",
    "export": "sim.cli.export",
    "traces": "sim.cli.traces",
    "compare": "sim.cli.compare",
    "bench": "sim.cli.bench",
    "validate": "sim.cli.validate",
}
_SHORT_HELP: dict[str, str] = {
    "run": "Replay a trace over a topology; write the summary and result files.",
    "ingest": "Measured traces (NCCL logs, Inspector, profiler, Flight Recorder, Kineto, PARAM, nccl-tests) -> Parquet.",
    "synth": "Synthesize a trace for a model and parallelism plan.",
    "analyze": "Characterise a trace: op counts, sizes, bandwidth over time; tables and plots.",
    "sweep": "What-if study over topologies and parameters (Dask).",
    "topo": "Describe a topology: counts, bisection, oversubscription; draw it.",
    "flows": "Simulate raw flows from CSV or Parquet over a topology.",
    "export": "Write a trace as NCCL debug-log text.",
    "traces": "List the built-in traces.",
    "compare": "One run per fabric and one side-by-side page with a verdict.",
    "bench": "A virtual nccl-tests: busbw per size of one collective over a fabric.",
    "validate": "Replay a measured nccl-tests table; measured vs simulated busbw per size.",
}


class Interrupted(Exception):
    """Ctrl-C during a sub-command (raised in place of KeyboardInterrupt so that click passes it on)."""


class ClosedPipe(Exception):
    """The reader of stdout went away (``simrun ... | head``): raised in place of BrokenPipeError, which click
    would turn into a silent exit 1, the code of an internal failure."""


#: Exit code when stdout's reader closes the pipe early: 128 + SIGPIPE, as a shell reports a tool SIGPIPE ends.
EXIT_CLOSED_PIPE = 141


def _stdout_is_closed() -> bool:
    """True when stdout's reader is gone (a BrokenPipeError from elsewhere, e.g. a Dask socket, is bad input).

    Linux and macOS poll a pipe without readers as POLLERR; a stream without a descriptor (a test's) cannot
    be asked, and the error is trusted.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return True
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll on this platform
        return True


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush into the closed pipe does not fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's StringIO): nothing to flush
        pass


class _Group(click.Group):
    """A group whose commands load lazily and whose default command is ``run``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(name)
        if module is None:
            return None
        return importlib.import_module(module).command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every sub-command (some pull in heavy libraries).
        with formatter.section("Commands"):
            formatter.write_dl(list(_SHORT_HELP.items()))

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # click would print a blank line and abort: main prints one line instead
            raise Interrupted() from None
        except BrokenPipeError as exc:
            if _stdout_is_closed():
                raise ClosedPipe() from None
            # a socket's (Dask's): an OSError like any other, which click would swallow into a bare exit 1
            raise click.ClickException(_one_line(exc)) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        try:
            return super().parse_args(ctx, args)
        except BrokenPipeError:  # ``simrun --help | head -1``
            if _stdout_is_closed():
                raise ClosedPipe() from None
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="collsim", prog_name="simrun")
def cli() -> None:
    """collsim: replay the collective traffic of large models over datacenter topologies.

    `simrun --trace T --topo X` is short for `simrun run --trace T --topo X`.
    """


#: click >= 8.2 raises this for a bare group (click 8.1 prints the help and exits 0 by itself).
_NO_ARGS_IS_HELP: tuple[type[BaseException], ...] = tuple(
    filter(None, [getattr(click.exceptions, "NoArgsIsHelpError", None)]))


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    # every family (traces, topologies, sim) derives from the one root in the leaf module traces.errors
    from traces.errors import CollsimError

    return (CollsimError, OSError)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{exc.filename}: {exc.strerror or text}"
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``simrun`` console script."""
    errors = _bad_input_errors()  # traces.errors is a leaf: importing it costs no pandas
    from sim.cli.common import writable_matplotlib_config

    writable_matplotlib_config()
    try:
        rv = cli.main(args=argv, prog_name="simrun", standalone_mode=False)
        try:
            sys.stdout.flush()  # a pipe closed early fails here, not in the interpreter's last flush at exit
        except BrokenPipeError:
            raise ClosedPipe() from None
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except _NO_ARGS_IS_HELP as exc:  # bare ``simrun``: its usage, as a help page (exit 0)
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.exceptions.Abort:
        click.echo("simrun: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"simrun: error: {_one_line(click.exceptions.ClickException(exc.format_message()))}", err=True)
        sys.exit(2)
    except ClosedPipe:  # the reader has what it wanted; no message (stdout is gone)
        _silence_stdout()
        sys.exit(EXIT_CLOSED_PIPE)
    except errors as exc:
        click.echo(f"simrun: error: {_one_line(exc)}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, Interrupted):  # exit 130 (128 + SIGINT); a run's folder stays marked .incomplete
        if threading.current_thread() is threading.main_thread():
            # a SIGINT that a library held back (pyarrow defers it during its I/O) must not kill us later
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        click.echo("simrun: interrupted", err=True)
        sys.exit(130)
    except Exception:  # an internal failure: the traceback helps the bug report
        if os.environ.get("SIMRUN_QUIET_ERRORS"):
            click.echo(f"simrun: internal error: {_one_line(sys.exc_info()[1])}", err=True)
        else:
            traceback.print_exc()
            click.echo("simrun: internal error (a bug: please report it with the traceback above)", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


__all__ = ["EXIT_CLOSED_PIPE", "SUBCOMMANDS", "ClosedPipe", "cli", "main"]
