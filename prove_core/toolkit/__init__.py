"""The server toolkit: everything a server module needs, in one import.

State lives in ``Table``s of a ``State`` subclass; tools are typed functions registered on a
``Server``; failures are typed ``ToolError``s. See docs/servers.md for a walk-through.
"""

from prove_core.errors import (
    Conflict,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ToolError,
)
from prove_core.toolkit import fake
from prove_core.toolkit.helpers import haversine_km, money, paginate, parse_date, require
from prove_core.toolkit.server import NoOptions, Server, ToolAnnotations, ToolDef, ToolSpec, ref
from prove_core.toolkit.state import Collection, Snapshot, State, Table, public

__all__ = [
    "Collection",
    "Conflict",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NoOptions",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Server",
    "Snapshot",
    "State",
    "Table",
    "ToolAnnotations",
    "ToolDef",
    "ToolError",
    "ToolSpec",
    "fake",
    "haversine_km",
    "money",
    "paginate",
    "parse_date",
    "public",
    "ref",
    "require",
]
