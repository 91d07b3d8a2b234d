"""What the service holds while it runs: the ``Runtime`` (engine, sandbox backend, judges, reward models,
calibration), one ``open_<resource>`` factory per module, and ``Services``, the app's long-lived state."""
