"""The whole chain in one command (``dlbench run``): stages, their work directory, resume."""
