"""The hold model: pure values and functions (wire format, allowlists, selectors, durations, time)."""
