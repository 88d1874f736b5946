"""The command line's parser class: usage errors as one line, whichever plugin's subcommand.

Every subcommand parser is one of these: the host builds each plugin's subparsers with it
(``register_commands``), and ``sadl.cli`` re-exports it for plugins that build parsers of their
own. It sits below the host so that the host can use it without importing the command line.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from sadl._errors import CommandError

__all__ = ["ArgumentParser"]


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as one line (``<prog>: error: <message>``, exit status 2).

    The parser class of the subparsers ``register_commands`` gets (``sadl.cli.ArgumentParser``),
    so every plugin's subcommands report usage errors in the same format; an unknown option is
    reported by the subcommand that got it.
    """

    def error(self, message: str) -> NoReturn:
        """Stop with one line naming this (sub)command; never the usage block."""
        raise CommandError(message, 2, prog=self.prog)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse, but a subcommand reports options it does not know itself."""
        result, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "sadl":
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return result, extras
