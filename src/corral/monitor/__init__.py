"""Watching jobs: sampling, alerts, diagnosis."""
