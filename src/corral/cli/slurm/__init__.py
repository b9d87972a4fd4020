"""Slurm's own commands (`sbatch`, `squeue`, `scancel`, `scontrol`, `sinfo`, `sacct`, `seff`, `sprio`)
spoken to a corral server, in Slurm 22.05's formats, so scripts and tools written for Slurm run unchanged.

Every module here imports only cheap parts of the standard library (no typing, dataclasses, re,
http.client at run time): these commands start within twice the interpreter's own start-up.
"""
