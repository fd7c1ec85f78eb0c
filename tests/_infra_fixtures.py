"""Session fixtures that start real infrastructure with the project's own code (elect.cluster)."""
