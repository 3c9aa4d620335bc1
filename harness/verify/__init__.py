"""Verification: fixed inputs (``inputs``), both sides through the runner family (``run``),
judged by the comparator (``compare``); ``command`` is ``dlbench verify``."""
