"""Cells: one unit of work in a process of its own, and what that process starts with.

The launcher and the child's entry point, the environment a cell starts in (threads,
allocator, math mode, a --with environment), and the CPU-contention window around it.
"""
