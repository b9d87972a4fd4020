"""Runs and their metrics as values: names, states, filters, series, batches, sweeps."""
