#!/bin/bash
# A Slurm batch script, unchanged: corral reads its #SBATCH lines and sets SLURM_* for it.
#SBATCH --job-name=hello-gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --time=00:05:00

echo "Job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURM_JOB_NODELIST"
echo "GPUs visible to this job: $CUDA_VISIBLE_DEVICES"
echo "Checkpoints go to: $CORRAL_CHECKPOINT_DIR"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv
fi
sleep 3
