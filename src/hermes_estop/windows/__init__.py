"""Maintenance windows (docs/design.md §6): scheduled holds whose deadman is the window's end.

Every name has one home, its module (`model.Window`, `windows_file.WindowsFile`,
`scheduler.WindowService`, ...): the package imports nothing, so a command that needs one module
of it does not load the others (the scheduler pulls in APScheduler).
"""
