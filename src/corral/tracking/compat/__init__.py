"""MLflow's model on corral's runs: experiments and runs in MLflow's shapes, and its artifact proxy's paths."""
