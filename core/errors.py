"""The one exception type that means "the user asked for something we cannot do".

The CLI prints a ``UserError`` as a single line on stderr and exits 2; every
other exception is a bug and keeps its traceback (shown with ``--debug``).
"""


class UserError(Exception):
    """Bad input or an unsatisfiable request; the message is the whole story."""

    exit_code = 2


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message (its type name if none).

    Framework errors often carry pages of C++ context; a user error shows one line.
    """
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
