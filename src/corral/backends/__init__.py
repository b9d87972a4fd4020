"""Where jobs run: `local` (this machine, corral schedules) behind the `Backend` interface."""
