"""Maintenance windows (docs/design.md §6): scheduled holds whose deadman is the window's end.

The package imports nothing, so a command that needs one of its modules does not load the others.
"""
