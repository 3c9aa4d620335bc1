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


def mask(text: str) -> str:
    """``text`` with every URL password replaced by ``***`` (the user name stays: it says
    which account was used)."""
    if "://" not in text and "password=" not in text.lower():
        return text
    return _QUERY.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>{MASK}\g<2>", text))
