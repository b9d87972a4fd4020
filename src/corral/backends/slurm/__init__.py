"""Where jobs run on a real Slurm cluster: sbatch scripts out, squeue/sacct text in."""
