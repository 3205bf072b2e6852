"""Tools: moving and copying files and directories."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from prove_core.toolkit import Conflict, InvalidArgument, PermissionDenied, Record, require
from prove_servers.filesystem.access import _charge, _require_access, _user
from prove_servers.filesystem.app import DESTINATIONS, AnyPath, server
from prove_servers.filesystem.examples import _project
from prove_servers.filesystem.model import RESOLVE_ERRORS, FsState
from prove_servers.filesystem.nodes import _insert_node, _now, _renamed_mime, _subtree
from prove_servers.filesystem.ops import _copied, _delete_nodes, _require_not_in_use, _set_text
from prove_servers.filesystem.paths import (
    Loc,
    _child_loc,
    _locate,
    _require_create,
    _require_existing,
    _require_unlink,
    _under,
)


def _destination(state: FsState, destination: str, name: str, *, follow: bool) -> Loc:
    """Where a move or copy lands: inside ``destination`` when it is an existing directory (like mv
    and cp), else at ``destination`` itself."""
    loc = _locate(state, destination, must_exist=False)
    if loc.node is not None and loc.node["kind"] == "directory":
        inside = _child_loc(state, loc, name)
        if follow and inside.node is not None and inside.node["kind"] == "symlink":
            return _locate(state, inside.path, must_exist=False)
        return inside
    return loc if follow else _locate(state, destination, follow=False, must_exist=False)


def _require_outside(source: Loc, target: Loc) -> None:
    require(target.path != source.path, f"{source.path} and the destination are the same", reason="SAME_PATH",
            error=InvalidArgument, path=source.path)
    if _require_existing(source)["kind"] == "directory":
        require(not target.path.startswith(source.path.rstrip("/") + "/"),
                f"cannot put {source.path} inside itself ({target.path})", reason="DESTINATION_INSIDE_SOURCE",
                error=InvalidArgument, path=source.path, destination=target.path)


def _move_path_asks(a: dict) -> list[str]:
    """A destination named like a file (with an extension) is a rename; otherwise a folder to move into."""
    if "." in str(a.get("destination", "")).rsplit("/", 1)[-1].lstrip("."):
        found = ["rename {source} to {destination}", "move {source} to {destination}",
                 "give {source} the new name {destination}"]
        overwriting = ["rename {source} to {destination}, replacing the file that's there",
                       "move {source} to {destination} and overwrite the existing one"]
    else:
        found = ["move {source} into {destination}", "put {source} in {destination}",
                 "mv {source} over to {destination}", "file {source} away in {destination}"]
        overwriting = ["move {source} into {destination}, replacing whatever has the same name there",
                       "move {source} over to {destination}, overwriting the old one"]
    return found + overwriting if a.get("overwrite") else found


@server.tool(
    destructive=True,  # with overwrite, replaces what was at the destination
    idempotent=True,  # a repeat finds no source (PATH_NOT_FOUND)
    reads=["file", "directory"],
    mutates=["file", "directory", "symlink"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "IS_A_DIRECTORY", "DIRECTORY_NOT_EMPTY", "SAME_PATH",
            "DESTINATION_INSIDE_SOURCE", "DIRECTORY_IN_USE", "OPERATION_NOT_PERMITTED"],
    examples=[{"source": "~/notes/ideas.md", "destination": "~/Documents"},
              {"source": "~/notes/todo.md", "destination": "~/notes/todo-2026.md"}],
    asks=_move_path_asks,
    values={"destination": lambda rng, s: rng.choice(DESTINATIONS)},
)
def move_path(
    state: FsState,
    source: AnyPath,
    destination: Annotated[str, Field(description="New path, or an existing directory to move the source into.")],
    overwrite: Annotated[bool, Field(description="Replace an existing file (or empty directory) at the "
                                                 "destination.")] = False,
) -> dict:
    """Move or rename a file, directory or symlink (mv); a directory moves with everything inside.
    If destination is an existing directory the source goes inside it under its own name. Returns
    the old and new paths. Fails with ALREADY_EXISTS (pass overwrite), IS_A_DIRECTORY /
    NOT_A_DIRECTORY (overwrite across kinds), DIRECTORY_NOT_EMPTY (overwriting a non-empty
    directory), SAME_PATH, DESTINATION_INSIDE_SOURCE, DIRECTORY_IN_USE, PERMISSION_DENIED (write
    permission on both directories; sticky /tmp), OPERATION_NOT_PERMITTED (the root) or a path
    error."""
    src = _locate(state, source, follow=False)
    node = _require_existing(src)
    require(node["parent_id"] is not None, "the root directory cannot be moved", reason="OPERATION_NOT_PERMITTED",
            error=PermissionDenied, path="/")
    target = _destination(state, destination, node["name"], follow=False)
    _require_outside(src, target)
    user = _user(state)
    _require_unlink(user, src)
    _require_create(user, target)
    replaced: list[Record] = []
    if target.node is not None:
        require(overwrite, f"{target.path} already exists; pass overwrite=true to replace it", reason="ALREADY_EXISTS",
                error=Conflict, path=target.path)
        existing = target.node
        if existing["kind"] == "directory":
            require(node["kind"] == "directory", f"{target.path} is a directory", reason="IS_A_DIRECTORY",
                    path=target.path)
            require(not state.nodes.where(parent_id=existing["id"]), f"{target.path} is not empty",
                    reason="DIRECTORY_NOT_EMPTY", path=target.path)
            _require_not_in_use(state, target)
        else:
            require(node["kind"] != "directory", f"{target.path} is not a directory", reason="NOT_A_DIRECTORY",
                    path=target.path)
        _require_unlink(user, target)
        replaced = [existing]
    _delete_nodes(state, replaced)
    now = _now(state)
    state.nodes.update(node["id"], parent_id=target.parent["id"], name=target.name,
                       dirent=f"{target.parent['id']}/{target.name}", mime=_renamed_mime(node, target.name))
    for directory in dict.fromkeys((src.parent["id"], target.parent["id"])):
        state.nodes.update(directory, modified_at=now)
    return {"source": src.path, "destination": target.path, "type": node["kind"], "replaced": bool(replaced)}


def _copy_path_asks(a: dict) -> list[str]:
    found = ["copy {source} to {destination}", "make a copy of {source} at {destination}",
             "duplicate {source} into {destination}"]
    if a.get("recursive"):
        found += ["copy {source} with everything inside to {destination}",
                  "make a full copy of {source}, subfolders and all, at {destination}"]
    if a.get("overwrite"):
        found += [t + ", replacing the file that's there" for t in found[:2]]
    return found


@server.tool(
    destructive=True,  # with overwrite, replaces the destination file's content
    # not idempotent: copying a directory again nests a second copy inside the first, as cp -r does
    reads=["file", "directory"],
    produces=["file", "directory"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "IS_A_DIRECTORY", "SAME_PATH", "DESTINATION_INSIDE_SOURCE",
            "QUOTA_EXCEEDED"],
    examples=[lambda s: {"source": _project(s), "destination": f"{_project(s)}-backup", "recursive": True},
              {"source": "~/notes/todo.md", "destination": "/tmp"}],
    asks=_copy_path_asks,
    values={"destination": lambda rng, s: rng.choice(DESTINATIONS)},
)
def copy_path(
    state: FsState,
    source: AnyPath,
    destination: Annotated[str, Field(description="Path of the copy, or an existing directory to copy into.")],
    recursive: Annotated[bool, Field(description="Required to copy a directory with everything inside "
                                                 "(cp -r).")] = False,
    overwrite: Annotated[bool, Field(description="Replace the content of an existing file at the "
                                                 "destination.")] = False,
) -> dict:
    """Copy a file, or a directory with everything inside (cp -r). The copy belongs to the current
    user, keeps the modes and counts against their quota; symlinks inside a directory are copied as
    links. If destination is an existing directory the copy goes inside it. Directories are never
    merged. Returns the copy's path, entries and bytes copied. Fails with IS_A_DIRECTORY (a directory
    without recursive, or a directory in the way), ALREADY_EXISTS (pass overwrite for a file),
    SAME_PATH, DESTINATION_INSIDE_SOURCE, PERMISSION_DENIED (read permission on everything copied,
    write permission on the destination), QUOTA_EXCEEDED or a path error."""
    src = _locate(state, source)
    node = _require_existing(src)
    require(node["kind"] != "directory" or recursive, f"{src.path} is a directory; pass recursive=true to copy it",
            reason="IS_A_DIRECTORY", path=src.path)
    target = _destination(state, destination, node["name"], follow=True)
    _require_outside(src, target)
    require(target.node is None or target.node["id"] != node["id"], f"{target.path} is {src.path}",
            reason="SAME_PATH", error=InvalidArgument, path=src.path)
    user = _user(state)
    top_path = src.path
    sources = _subtree(state, node)
    for each, rel in sources:
        where = _under(top_path, rel)
        if each["kind"] != "symlink":
            _require_access(user, each, "r", where)
        if each["kind"] == "directory":
            _require_access(user, each, "x", where)
    if target.node is not None:
        require(overwrite, f"{target.path} already exists; pass overwrite=true to replace the file",
                reason="ALREADY_EXISTS", error=Conflict, path=target.path)
        require(target.node["kind"] != "directory" and node["kind"] != "directory",
                f"{target.path} is in the way: directories are never merged or replaced by a copy",
                reason="IS_A_DIRECTORY", path=target.path)
        _require_access(user, target.node, "w", target.path)
        if node["binary"]:
            _charge(state, {target.node["owner"]: node["size"] - target.node["size"]})
            fields = {f: node[f] for f in ("size", "content", "binary", "mime", "sha256", "meta")}
            if any(target.node[k] != v for k, v in fields.items()):
                state.nodes.update(target.node["id"], **fields, modified_at=_now(state))
        else:
            _set_text(state, target, node["content"] or "")
        return {"source": src.path, "destination": target.path, "entries_copied": 1, "bytes_copied": node["size"],
                "replaced": True}
    _require_create(user, target)
    copied_bytes = sum(n["size"] for n, _ in sources if n["kind"] == "file")
    _charge(state, {user["id"]: copied_bytes})
    now, new_ids = _now(state), {}
    for each, _rel in sources:
        parent = target.parent if each["id"] == node["id"] else state.nodes.get(new_ids[each["parent_id"]])
        name = target.name if each["id"] == node["id"] else each["name"]
        copy = _insert_node(state, parent, name, each["kind"], owner=user["id"], group=user["groups"][0], when=now,
                            **_copied(each))
        new_ids[each["id"]] = copy["id"]
    state.nodes.update(target.parent["id"], modified_at=now)
    return {"source": src.path, "destination": target.path, "entries_copied": len(sources),
            "bytes_copied": copied_bytes, "replaced": False}
