"""One process's view: `Estop`, the check path (kept small: every consumer imports it), forecasts."""
