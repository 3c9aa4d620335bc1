"""The one exception type that means "the user asked for something we cannot do".

The CLI prints a ``UserError`` as a single line on stderr and exits 2; every
other exception is a bug and keeps its traceback (shown with ``--debug``).
"""


class UserError(Exception):
    """Bad input or an unsatisfiable request; the message is the whole story."""

    exit_code = 2
