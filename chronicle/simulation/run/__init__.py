"""A run's rows and settings: the models, the settings and the checks on them, its script, and the reads the pages and a turn share."""
