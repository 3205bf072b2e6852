"""Tools: permission bits, ownership and symlinks."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from prove_core.toolkit import Conflict, InvalidArgument, PermissionDenied, ref, require
from prove_servers.filesystem.access import _charge, _require_access, _require_owner, _user
from prove_servers.filesystem.app import _PATH_HELP, DIRECTORY_MODES, FILE_MODES, SYMLINKS, AnyPath, Mode, server
from prove_servers.filesystem.model import RESOLVE_ERRORS, ROOT, FsState, _invalid
from prove_servers.filesystem.nodes import _entry, _mode_text, _permissions, _subtree
from prove_servers.filesystem.ops import _create
from prove_servers.filesystem.paths import (
    _check_text,
    _link_parts,
    _locate,
    _require_create,
    _require_existing,
    _target_report,
    _under,
)

# -- permissions ---------------------------------------------------------------------------------


def _change_mode_asks(a: dict) -> list[str]:
    found = ["set the permissions of {path} to {mode}", "chmod {path} to {mode}", "change the mode of {path} to {mode}",
             "make {path} mode {mode}"]
    if a.get("recursive"):
        found += ["set {path} and everything inside it to mode {mode}", "recursively chmod {path} to {mode}",
                  "apply permissions {mode} to all of {path}, contents included"]
    return found


@server.tool(
    idempotent=True,
    reads=["file", "directory"],
    mutates=["file", "directory"],
    errors=[*RESOLVE_ERRORS, "OPERATION_NOT_PERMITTED"],
    examples=[{"path": "~/notes/todo.md", "mode": "0600"}, {"path": "~/projects", "mode": "750", "recursive": True},
              {"path": "~/notes/archive/2024-taxes.md", "mode": "644"}],
    asks=_change_mode_asks,
    values={"mode": lambda rng, s: rng.choice(FILE_MODES + DIRECTORY_MODES)},
)
def change_mode(
    state: FsState,
    path: AnyPath,
    mode: Mode,
    recursive: Annotated[bool, Field(description="Also apply to everything inside a directory (chmod -R); "
                                                 "symlinks are skipped.")] = False,
) -> dict:
    """Set permission bits (chmod) from an octal mode: 4 read, 2 write, 1 execute for owner, group
    and others, e.g. 644 (rw-r--r--), 600 (private), 755 (rwxr-xr-x); 1000 is the sticky bit.
    Symlinks are followed. Only the owner (or root) may do it. Returns the new mode and how many
    entries changed. Fails with OPERATION_NOT_PERMITTED (not the owner of every entry),
    PERMISSION_DENIED (a directory inside cannot be read) or a path error."""
    loc = _locate(state, path)
    node = _require_existing(loc)
    user = _user(state)
    _require_owner(user, node, loc.path, "change the mode of")
    targets = [(node, loc.path)]
    if recursive and node["kind"] == "directory":
        targets = []
        for each, rel in _subtree(state, node):
            where = _under(loc.path, rel)
            if each["kind"] == "symlink":
                continue
            _require_owner(user, each, where, "change the mode of")
            if each["kind"] == "directory":
                _require_access(user, each, "r", where)
                _require_access(user, each, "x", where)
            targets.append((each, where))
    bits = int(mode, 8)
    changed = [each for each, _ in targets if each["mode"] != bits]
    for each in changed:
        state.nodes.update(each["id"], mode=bits)
    return {"path": loc.path, "mode": _mode_text(bits), "permissions": _permissions({**node, "mode": bits}),
            "changed": len(changed)}


@server.tool(
    idempotent=True,
    reads=["file", "directory", "user", "group"],
    mutates=["file", "directory", "user"],
    errors=[*RESOLVE_ERRORS, "USER_NOT_FOUND", "GROUP_NOT_FOUND", "OPERATION_NOT_PERMITTED", "QUOTA_EXCEEDED"],
    examples=[lambda s: {"path": "~/notes/todo.md", "owner": s.get_var("user"), "group": "staff"},
              lambda s: {"path": "~/Documents/resume.md", "owner": s.groups.get("staff")["members"][1]}],
    asks=("make {owner} the owner of {path}", "give ownership of {path} to {owner}",
          "change the owner of {path} to {owner}", "hand {path} over to {owner} and set its group to {group}",
          "chown {path} to {owner} with group {group}"),
)
def change_owner(
    state: FsState,
    path: AnyPath,
    owner: Annotated[str, ref("user", "User name of the new owner (the current owner to change only the group); "
                                      "see list_users.")],
    group: Annotated[str | None, ref("group", "New group; unchanged when omitted. You must be a member of it.")] = None,
) -> dict:
    """Change the owner and/or group of an entry you own (chown); symlinks are followed. Giving a file
    to another user moves its bytes to their quota (like transferring ownership on a shared drive).
    Returns the entry's details. Fails with OPERATION_NOT_PERMITTED (you do not own it, or you are
    not a member of the group), USER_NOT_FOUND, GROUP_NOT_FOUND, QUOTA_EXCEEDED (the new owner's
    quota) or a path error."""
    loc = _locate(state, path)
    node = _require_existing(loc)
    new_owner = state.users.get(owner)
    new_group = state.groups.get(group) if group is not None else state.groups.get(node["group"])
    user = _user(state)
    _require_owner(user, node, loc.path, "change the owner of")
    require(user["id"] == ROOT or new_group["id"] == node["group"] or user["id"] in new_group["members"],
            f"{user['id']} is not a member of group {new_group['id']}", reason="OPERATION_NOT_PERMITTED",
            error=PermissionDenied, group=new_group["id"])
    if node["kind"] == "file" and new_owner["id"] != node["owner"]:
        _charge(state, {new_owner["id"]: node["size"], node["owner"]: -node["size"]})
    updated = state.nodes.update(node["id"], owner=new_owner["id"], group=new_group["id"])
    return _entry(updated, loc.path)


# -- symlinks -----------------------------------------------------------------------------------


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_EXISTS
    reads=["directory"],
    produces=["symlink"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS"],
    examples=[{"path": "~/todo-link", "target": "notes/todo.md"}, {"path": "~/team", "target": "/srv/team"}],
    asks=("create a symlink at {path} pointing to {target}", "make a shortcut {path} that points at {target}",
          "link {path} to {target}", "add a symbolic link {path} that goes to {target}"),
    values={"path": lambda rng, s: rng.choice(SYMLINKS)[0], "target": lambda rng, s: rng.choice(SYMLINKS)[1]},
)
def create_symlink(
    state: FsState,
    path: Annotated[str, Field(description=f"Where to create the link: {_PATH_HELP}.")],
    target: Annotated[str, Field(description="What the link points to: an absolute path, or a path relative to the "
                                             "link's directory. It need not exist yet.")],
) -> dict:
    """Create a symbolic link (ln -s). The target is stored as given and need not exist; it may not
    point outside the tree. Returns the link, its target, where it resolves now (or the problem:
    PATH_NOT_FOUND for a dangling link, SYMLINK_LOOP). Fails with ALREADY_EXISTS, PATH_OUTSIDE_ROOT
    (the target climbs above /), INVALID_PATH (an empty, over-long or malformed target, or one
    starting with ~), PERMISSION_DENIED (no write permission on the directory) or a path error."""
    loc = _locate(state, path, follow=False, must_exist=False)
    require(loc.node is None, f"{loc.path} already exists", reason="ALREADY_EXISTS", error=Conflict, path=loc.path)
    _check_text(target, "symlink target")
    if target.startswith("~"):
        raise _invalid("symlink targets are stored literally; write the home directory out, e.g. /home/...")
    _link_parts(loc.path.strip("/").split("/")[:-1], target)  # refuses targets outside the root
    _require_create(_user(state), loc)
    node = _create(state, loc, "symlink", 0o777, target=target, size=len(target.encode()))
    return {**_entry(node, loc.path), **_target_report(state, loc.path)}


@server.tool(
    answers=("target", "resolves_to"),
    read_only=True,
    reads=["symlink"],
    errors=[*RESOLVE_ERRORS, "NOT_A_SYMLINK"],
    examples=[{"path": "~/current-project"}, {"path": "~/old-notes"}],
    asks=("check where {path} points", "show me the target of {path}", "resolve {path} and tell me if it's broken",
          "find out what {path} links to"),
)
def read_symlink(state: FsState, path: Annotated[str, ref("symlink", f"Path of a symlink: {_PATH_HELP}.")]) -> dict:
    """What a symlink points to (readlink): the stored target, the path it resolves to now, and the
    problem if it does not resolve (PATH_NOT_FOUND for a dangling link, SYMLINK_LOOP, ...). Fails
    with NOT_A_SYMLINK or a path error."""
    loc = _locate(state, path, follow=False)
    node = _require_existing(loc)
    require(node["kind"] == "symlink", f"{loc.path} is a {node['kind']}, not a symlink", reason="NOT_A_SYMLINK",
            error=InvalidArgument, path=loc.path)
    return {"path": loc.path, "target": node["target"], **_target_report(state, loc.path)}
