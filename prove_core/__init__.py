"""PROVE core: hookspecs, plugin manager, registry, config, data model, session runtime, CLI.

The public surface a plugin author needs::

    from prove_core import hookimpl
    from prove_core.toolkit import Server, State, Table, ref, NotFound, FailedPrecondition
"""

from prove_core.plugin.hookspecs import hookimpl, hookspec

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl", "hookspec"]
