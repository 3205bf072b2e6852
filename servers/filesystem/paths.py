"""Paths: validation, normalization and resolution against the session's root.

Every path a tool receives comes through ``_locate``: checked (no NUL or control characters,
no backslashes, bounded length), normalized (``..`` may not climb above ``/``) and resolved
one indexed lookup per component, following symlinks a bounded number of times.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from prove_core.toolkit import FailedPrecondition, NotFound, PermissionDenied, Record, ToolError, require
from prove_servers.filesystem.access import _require_access, _user
from prove_servers.filesystem.model import MAX_SYMLINK_HOPS, NAME_MAX, PATH_MAX, ROOT, FsState, _invalid, _outside

# -- paths: validation, normalization and resolution ----------------------------------------------

_FOREIGN_ROOT = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://|[A-Za-z]:([\\/]|$)|\\\\)")


def _check_text(raw: str, what: str) -> None:
    """Shape rules shared by paths and symlink targets."""
    if not raw:
        raise _invalid(f"the {what} is empty")
    if "\x00" in raw:
        raise _invalid(f"the {what} contains a NUL byte")
    if len(raw) > PATH_MAX:
        raise _invalid(f"the {what} is {len(raw)} characters long; the limit is {PATH_MAX}", limit=PATH_MAX)
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise _invalid(f"the {what} contains control characters")
    if _FOREIGN_ROOT.match(raw):
        raise _outside(f"{raw!r} names a location outside this machine's tree (drive, share or URL); "
                       "use a path under /", path=raw)
    if "\\" in raw:
        raise _invalid(f"the {what} contains a backslash; separate components with /")


def _parts(path: str, shown: str) -> list[str]:
    """Lexically normalized components of an absolute path; ``..`` may not climb above ``/``."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                raise _outside(f"{shown!r} climbs above the root directory", path=shown)
            out.pop()
            continue
        if len(part.encode()) > NAME_MAX:
            raise _invalid(f"the name {part[:40]!r}... is longer than {NAME_MAX} bytes", limit=NAME_MAX)
        out.append(part)
    return out


def _join(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def _absolute_parts(state: FsState, raw: str) -> list[str]:
    """A tool's path argument as normalized components: ``~`` and ``~user`` name home
    directories, other relative paths start at the working directory."""
    _check_text(raw, "path")
    if raw.startswith("~"):
        name, _, rest = raw[1:].partition("/")
        user = state.users.find(name or state.get_var("user"))
        if user is None:
            raise _invalid(f"{raw!r}: there is no user named {name!r}")
        raw_abs = f"{user['home']}/{rest}"
    elif raw.startswith("/"):
        raw_abs = raw
    else:
        raw_abs = f"{_path_of(state, state.nodes.get(state.get_var('cwd_id')))}/{raw}"
    return _parts(raw_abs, raw)


def _link_parts(link_dir: list[str], target: str) -> list[str]:
    """Where a symlink's target points: relative targets start at the link's directory."""
    base = target if target.startswith("/") else _join(link_dir) + "/" + target
    return _parts(base, target)


class Loc(NamedTuple):
    """A resolved path: the entry (None when it does not exist yet), its directory and name."""

    path: str
    node: Record | None
    parent: Record
    name: str


def _locate(state: FsState, raw: str, *, follow: bool = True, must_exist: bool = True) -> Loc:
    """Resolve a path safely. Symlinks in directories are always followed, a final one only
    with ``follow``; every directory walked through needs search (x) permission."""
    parts = _absolute_parts(state, raw)
    for _ in range(MAX_SYMLINK_HOPS + 1):
        loc, link_at = _descend(state, parts, follow=follow, must_exist=must_exist)
        if loc is not None:
            return loc
        link = state.nodes.first(dirent=link_at[1])
        parts = _link_parts(parts[: link_at[0]], link["target"]) + parts[link_at[0] + 1 :]
    raise FailedPrecondition(f"too many levels of symbolic links resolving {raw!r} (a loop?)", reason="SYMLINK_LOOP",
                             path=raw, limit=MAX_SYMLINK_HOPS)


def _descend(state: FsState, parts: list[str], *, follow: bool, must_exist: bool) -> tuple[Loc | None, Any]:
    """One walk from the root: a ``Loc``, or (None, (index, dirent)) at a symlink to follow."""
    user = _user(state)
    parent = node = state.nodes.get(state.get_var("root_id"))
    for i, name in enumerate(parts):
        _require_access(user, node, "x", _join(parts[:i]))
        dirent = f"{node['id']}/{name}"
        child = state.nodes.first(dirent=dirent)
        last = i == len(parts) - 1
        if child is None:
            if last and not must_exist:
                return Loc(_join(parts), None, node, name), None
            missing = _join(parts[: i + 1])
            raise NotFound(f"{missing} does not exist", reason="PATH_NOT_FOUND", path=missing)
        if child["kind"] == "symlink" and (follow or not last):
            return None, (i, dirent)
        if not last and child["kind"] != "directory":
            raise FailedPrecondition(f"{_join(parts[: i + 1])} is a file, not a directory", reason="NOT_A_DIRECTORY",
                                     path=_join(parts[: i + 1]))
        parent, node = node, child
    return Loc(_join(parts), node, parent, parts[-1] if parts else ""), None


def _child_loc(state: FsState, directory: Loc, name: str) -> Loc:
    """The entry ``name`` inside a resolved directory (not followed if it is a symlink)."""
    _require_access(_user(state), directory.node, "x", directory.path)
    child = state.nodes.first(dirent=f"{directory.node['id']}/{name}")
    return Loc(_child_path(directory.path, name), child, directory.node, name)


def _child_path(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def _under(path: str, rel: list[str]) -> str:
    """The path of an entry ``rel`` components below ``path``."""
    return "/".join([path.rstrip("/"), *rel]) if rel else path


def _path_of(state: FsState, node: Record) -> str:
    names = []
    while node["parent_id"] is not None:
        names.append(node["name"])
        node = state.nodes.get(node["parent_id"])
    return _join(names[::-1])


def _try_resolve(state: FsState, raw: str) -> tuple[str | None, str | None]:
    """(resolved path, None) or (None, the reason resolution fails): for reports, never raises."""
    try:
        return _locate(state, raw).path, None
    except ToolError as exc:
        return None, exc.reason


def _require_existing(loc: Loc) -> Record:
    assert loc.node is not None
    return loc.node


def _require_directory(loc: Loc) -> Record:
    node = _require_existing(loc)
    require(node["kind"] == "directory", f"{loc.path} is a {node['kind']}, not a directory", reason="NOT_A_DIRECTORY",
            path=loc.path)
    return node


def _require_file(loc: Loc) -> Record:
    node = _require_existing(loc)
    require(node["kind"] != "directory", f"{loc.path} is a directory", reason="IS_A_DIRECTORY", path=loc.path)
    return node


def _text_of(loc: Loc) -> str:
    node = _require_file(loc)
    require(not node["binary"], f"{loc.path} is a binary {node['mime']} file; it has no text to read. "
            "get_file_info shows its metadata", reason="BINARY_FILE", path=loc.path, mime=node["mime"])
    return node["content"] or ""


# -- checks on the directory of a located entry ----------------------------------------------------


def _require_unlink(user: Record, loc: Loc) -> None:
    """Removing or renaming an entry needs write and search on its directory; in a sticky
    directory (/tmp) only the entry's owner, the directory's owner or root may do it."""
    directory = _path_of_parent(loc)
    _require_access(user, loc.parent, "w", directory)
    _require_access(user, loc.parent, "x", directory)
    node = _require_existing(loc)
    if loc.parent["mode"] & 0o1000 and user["id"] not in (ROOT, node["owner"], loc.parent["owner"]):
        raise PermissionDenied(f"{directory} is sticky: only {node['owner']} may remove or rename {loc.path}",
                               reason="PERMISSION_DENIED", path=loc.path, needs="owner")


def _require_create(user: Record, loc: Loc) -> None:
    directory = _path_of_parent(loc)
    _require_access(user, loc.parent, "w", directory)
    _require_access(user, loc.parent, "x", directory)


def _path_of_parent(loc: Loc) -> str:
    return loc.path.rsplit("/", 1)[0] or "/"


# -- symlink targets -------------------------------------------------------------------------------


def _target_report(state: FsState, path: str) -> dict[str, Any]:
    resolved, problem = _try_resolve(state, path)
    return {"resolves_to": resolved, "problem": problem, "dangling": problem == "PATH_NOT_FOUND"}
