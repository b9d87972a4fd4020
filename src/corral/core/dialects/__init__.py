"""Foreign formats read into corral's own: #SBATCH, HTCondor and ClassAd, MLflow's filters and requests, the tracker client's bodies, HTTP ranges."""
