"""PROVE's bundled plugins (installed as ``prove_plugins``): glue components that register
through the same hooks a third-party package uses."""
