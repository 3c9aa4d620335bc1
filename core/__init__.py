"""The bottom layer: what every other layer needs and nothing of theirs.

Errors, atomic writes, tensor descriptions, device names and the one
``Registry`` every extension point is declared in.  It imports no
deep-learning framework and no other dlbench package (tests/test_layers.py).
"""
