"""The plugin system: the hooks (``hookspecs``), finding and loading plugins (``manager``) and the
registry of components by kind and name (``registry``)."""
