"""Child side of ``harness.launcher``: run one cell and report back as JSON.

Kinds map to ``module:function`` so that this module imports nothing heavy;
the function imports its framework itself, after the parent has set the
thread environment.
"""
from __future__ import annotations

import importlib
import json
import sys
import traceback

from harness.atomic import write_json
from harness.errors import UserError

KINDS = {
    "train": "harness.training.runner:child",
    # Used by the tests to exercise crash, hang and memory paths for real.
    "selftest": "harness.selftest:child",
}


def resolve(kind: str):
    module, _, func = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), func)


def main(argv: list[str]) -> int:
    kind, inp, out = argv
    with open(inp, encoding="utf-8") as fh:
        payload = json.load(fh)
    try:
        reply = {"status": "ok", "result": resolve(kind)(payload)}
    except UserError as exc:
        reply = {"status": "usage_error", "error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the parent decides what a failure means
        reply = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc()}
    write_json(out, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
