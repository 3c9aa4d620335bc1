"""What the tests share that is not a fixture: tiny models and files, CLI checks, the child
scripts that run a framework in a process of its own."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: docs/, scripts/, tests/
