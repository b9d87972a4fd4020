"""Units and times as people and Slurm write them: sizes, durations, moments."""
