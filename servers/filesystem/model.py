"""The filesystem's state and limits: the tables of a session, seed options, size and path limits,
and the path errors every tool can raise.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from prove_core.toolkit import InvalidArgument, PermissionDenied, State, Table

NodeType = Literal["file", "directory", "symlink"]


# -- limits ----------------------------------------------------------------------------------------

PATH_MAX = 1024  # characters in a path or symlink target
NAME_MAX = 255  # bytes in one path component
MAX_SYMLINK_HOPS = 16  # links followed while resolving one path; more means a loop
MAX_TEXT_FILE_BYTES = 1_048_576  # a text file may grow to 1 MiB
MAX_WRITE_CHARS = 100_000  # characters of content in one call
MAX_DIFF_BYTES = 262_144  # each side of a diff
MAX_ARCHIVE_ENTRIES = 2_000
MIB = 1_048_576
ROOT = "root"
DIR_SIZE = 0  # directories weigh nothing; disk usage sums file sizes

MIME_TYPES = {
    ".md": "text/markdown", ".txt": "text/plain", ".py": "text/x-python", ".js": "text/javascript",
    ".json": "application/json", ".toml": "application/toml", ".csv": "text/csv", ".sh": "text/x-shellscript",
    ".log": "text/plain", ".jpg": "image/jpeg", ".png": "image/png", ".pdf": "application/pdf",
    ".zip": "application/zip", ".pub": "text/plain", ".cfg": "text/plain",
}


# -- state and options ----------------------------------------------------------------------------


class FsState(State):
    """One machine's tree. Vars: ``user`` (who is signed in), ``root_id`` and ``cwd_id`` (the
    working directory, by inode, so moving it keeps it)."""

    users = Table("user", prefix="usr")  # keyed by user name; carries quota and usage
    groups = Table("group", prefix="grp")  # keyed by group name
    nodes = Table("node", prefix="ino", index=("parent_id", "dirent"))
    archives = Table("archive", prefix="arc", index=("owner",))
    trash = Table("trash_item", prefix="trs", index=("owner",))


@attrs.frozen(kw_only=True)
class FsOptions:
    """Seed size: how many projects the user's home holds; meeting notes and photo albums grow with it."""

    projects: int = attrs.field(default=4, validator=attrs.validators.gt(0))


# -- errors ---------------------------------------------------------------------------------------


def _invalid(message: str, **details: Any) -> InvalidArgument:
    return InvalidArgument(message, reason="INVALID_PATH", **details)


def _outside(message: str, **details: Any) -> PermissionDenied:
    return PermissionDenied(message, reason="PATH_OUTSIDE_ROOT", **details)


# Every tool that takes a path can fail while resolving it.
RESOLVE_ERRORS = ["INVALID_PATH", "PATH_OUTSIDE_ROOT", "PATH_NOT_FOUND", "NOT_A_DIRECTORY", "PERMISSION_DENIED",
                  "SYMLINK_LOOP"]
