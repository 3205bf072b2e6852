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
from prove_core.toolkit.helpers import (
    ISO_DATE,
    MINUTE_FORMAT,
    Record,
    haversine_km,
    iso_datetime,
    local_minute,
    lookup,
    minute_text,
    money,
    paginate,
    parse_date,
    require,
    require_found,
)
from prove_core.toolkit.phrasing import part_of
from prove_core.toolkit.server import NoOptions, Server, ToolAnnotations, ToolDef, ToolSpec, ref
from prove_core.toolkit.state import Collection, Snapshot, State, Table, public

__all__ = [
    "Collection",
    "Conflict",
    "FailedPrecondition",
    "ISO_DATE",
    "MINUTE_FORMAT",
    "Internal",
    "InvalidArgument",
    "NoOptions",
    "NotFound",
    "PermissionDenied",
    "Record",
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
    "iso_datetime",
    "local_minute",
    "lookup",
    "minute_text",
    "money",
    "paginate",
    "parse_date",
    "part_of",
    "public",
    "ref",
    "require",
    "require_found",
]
