"""What every subcommand shares: exit statuses, argument types, the parser that exits 2, and
failures printed the same way (stderr, and one JSON object on stdout under ``--json``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn, Protocol

import msgspec

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Parser(argparse.ArgumentParser):
    """Usage errors exit with EXIT_USAGE and one line of why."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"kernelscope: {message}\n")


class Subparsers(Protocol):
    """What argparse's ``add_subparsers()`` returns, as far as the subcommands use it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def positive_float(text: str) -> float:
    """An argument type: a number > 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argument type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def count(text: str) -> int:
    """An argument type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def print_json(value: object) -> None:
    """One JSON object on stdout."""
    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")


def fail(kind: str, message: str, as_json: bool, status: int = EXIT_FAILED) -> int:
    """Print a failure (and its JSON error object); the exit status."""
    if as_json:
        print_json({"error": {"kind": kind, "message": message}})
    print(f"kernelscope: {message}", file=sys.stderr)
    return status


def fail_usage(message: str, as_json: bool) -> int:
    """A usage failure: exit status EXIT_USAGE."""
    return fail("usage", message, as_json, EXIT_USAGE)
