"""Running the service on more than one machine: Ray Serve replicas (``ray_serve``)."""
