"""What the service holds while it runs: the ``Runtime`` (engine, sandbox backend, judges, reward models,
calibration), and one ``open_<resource>`` factory per module."""
