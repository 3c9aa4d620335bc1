"""Database URLs: which ``--db`` values name a server, and their secrets kept out of
everything dlbench prints or stores (errors, warnings, records' command lines and
configuration).  Plain text only: nothing here imports a driver."""

from __future__ import annotations

import re

SCHEMES = ("postgresql://", "postgres://")

# user:PASSWORD@ in any URL, and password=... in a URL's query: greedy up to the last
# '@' of the word, so a password with a stray '@' is masked whole rather than in part.
_USERINFO = re.compile(r"(://[^/\s:@]*:)\S*(@)")
_QUERY = re.compile(r"([?&]password=)[^&\s\"']*", re.IGNORECASE)
MASK = "***"


def is_url(location: object) -> bool:
    return str(location).strip().lower().startswith(SCHEMES)


def exposed_password(location: object) -> str | None:
    """A note when ``--db`` carries its password in the URL: dlbench masks it in what it
    prints and stores, but the shell's history and the process list (``ps``) show it to
    anyone on the machine.  None when there is no password in it."""
    text = str(location or "")
    if not is_url(text) or mask(text) == text:
        return None
    return (
        f"--db {mask(text)}: the password is in the URL, which the shell's history, the "
        "process list and config files show; put it in ~/.pgpass (chmod 600) or $PGPASSWORD, "
        "which PostgreSQL's client library reads, and leave it out of the URL"
    )


def mask(text: str) -> str:
    """``text`` with every URL password replaced by ``***`` (the user name stays: it says
    which account was used)."""
    if "://" not in text and "password=" not in text.lower():
        return text
    return _QUERY.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>{MASK}\g<2>", text))
