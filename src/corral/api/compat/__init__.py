"""Foreign clients' APIs served by corral: MLflow's REST API and the tracker client's routes, each translated into corral's own."""
