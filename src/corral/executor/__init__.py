"""Local job supervision: launch, GPU binding, signals, limits, logs, recovery.

Kept free of heavy imports: `python -m corral.executor.supervisor` starts with it.
"""
