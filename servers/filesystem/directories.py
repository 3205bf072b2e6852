"""Tools: who is signed in, the working directory, and directories (list, tree, create, remove,
disk usage).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from prove_core.toolkit import Conflict, Record, paginate, ref, require
from prove_servers.filesystem.access import _allowed, _quota_view, _require_access, _user
from prove_servers.filesystem.app import (
    _PATH_HELP,
    DIRECTORY_MODES,
    NEW_DIRECTORIES,
    DirPath,
    Limit,
    Mode,
    NewPath,
    Offset,
    _here,
    server,
)
from prove_servers.filesystem.examples import _with_empty_dir
from prove_servers.filesystem.model import RESOLVE_ERRORS, FsState
from prove_servers.filesystem.nodes import _children, _entry, _human, _now, _subtree
from prove_servers.filesystem.ops import _create, _delete_nodes, _require_not_in_use
from prove_servers.filesystem.paths import (
    Loc,
    _absolute_parts,
    _child_loc,
    _child_path,
    _join,
    _locate,
    _path_of,
    _path_of_parent,
    _require_create,
    _require_directory,
    _require_unlink,
    _under,
)

# -- session ------------------------------------------------------------------------------------------


@server.tool(
    answers=("user", "full_name", "working_directory"),
    read_only=True,
    reads=["user", "directory", "working_directory"],
    examples=[{}],
    asks=("tell me which user I'm signed in as", "show my account details and my current working directory",
          "check who I'm logged in as on this machine", "show how much of my disk quota I've used"),
)
def get_current_user(state: FsState) -> dict:
    """Who is signed in: user name, uid, full name, groups, home directory, the current working
    directory (where relative paths start) and disk quota usage."""
    user = _user(state)
    return {"user": user["id"], "uid": user["uid"], "full_name": user["full_name"], "groups": user["groups"],
            "home": user["home"], "shell": user["shell"],
            "working_directory": _path_of(state, state.nodes.get(state.get_var("cwd_id"))),
            "quota": _quota_view(user)}


@server.tool(
    read_only=True,
    reads=["user", "group"],
    examples=[{}],
    asks=("list every user account on this machine", "show me who has an account here and which groups exist",
          "tell me who else uses this computer", "show the users and groups set up on this laptop"),
)
def list_users(state: FsState) -> dict:
    """Every account on this machine (name, uid, full name, home, groups, disk usage and quota) and
    every group with its members: the names change_owner accepts."""
    users = [{"user": u["id"], "uid": u["uid"], "full_name": u["full_name"], "home": u["home"],
              "groups": u["groups"], "quota": _quota_view(u)} for u in state.users.all()]
    groups = [{"group": g["id"], "gid": g["gid"], "members": g["members"]} for g in state.groups.all()]
    return {"current_user": state.get_var("user"), "users": users, "groups": groups}


@server.tool(
    idempotent=True,
    reads=["directory"],
    mutates=["working_directory"],
    errors=RESOLVE_ERRORS,
    examples=[{"path": "~/projects"}, {"path": "/srv/team"}],
    asks=("go to {path}", "change into {path}", "switch my working directory to {path}", "cd into {path}",
          "move me over to {path} so we work from there"),
)
def change_directory(state: FsState, path: DirPath) -> dict:
    """Change the working directory (cd): relative paths in later calls start there. Returns the new
    working directory. Fails with NOT_A_DIRECTORY, PERMISSION_DENIED (no search permission) or a
    path error."""
    loc = _locate(state, path)
    node = _require_directory(loc)
    _require_access(_user(state), node, "x", loc.path)
    if state.get_var("cwd_id") != node["id"]:
        state.set_var("cwd_id", node["id"])
    return {"working_directory": loc.path}


# -- directories ----------------------------------------------------------------------------------


def _list_directory_asks(a: dict) -> list[str]:
    """Hidden files and the order are said in words, in some of the templates."""
    found = ["list what's in {path}", "show me the files in {path}", "give me a detailed listing of {path}",
             "run ls -l on {path}"]
    if a.get("show_hidden"):
        found += ["list everything in {path}, hidden files included", "show me all the files in {path}, dotfiles too"]
    order = {"size": ", biggest first", "modified": ", most recently changed first"}.get(a.get("sort"), "")
    if order:
        found += ["list what's in {path}" + order, "show me the files in {path}" + order]
        if a.get("show_hidden"):
            found.append("give me a full listing of {path} including the hidden entries" + order)
    return _here(a, "path", found)


@server.tool(
    answers=("type", "size"),
    read_only=True,
    reads=["directory", "file", "symlink"],
    errors=RESOLVE_ERRORS,
    examples=[{"path": "~"}, {"path": "~/projects", "show_hidden": True, "sort": "size"}, {}],
    asks=_list_directory_asks,
)
def list_directory(
    state: FsState,
    path: Annotated[str, ref("directory", f"Directory to list: {_PATH_HELP}.")] = ".",
    show_hidden: Annotated[bool, Field(description="Include entries whose name starts with a dot.")] = False,
    sort: Annotated[Literal["name", "size", "modified"], Field(
        description="Order: by name, largest first, or most recently modified first.")] = "name",
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict:
    """List a directory with details (ls -l): each entry's name, path, type (file, directory,
    symlink), size in bytes, octal mode, permission string, owner, group, modification time and,
    for symlinks, the target. Paged. Fails with NOT_A_DIRECTORY, PERMISSION_DENIED (no read
    permission on the directory) or a path error."""
    loc = _locate(state, path)
    node = _require_directory(loc)
    _require_access(_user(state), node, "r", loc.path)
    children = [c for c in _children(state, node) if show_hidden or not c["name"].startswith(".")]
    if sort == "size":
        children.sort(key=lambda c: -c["size"])
    elif sort == "modified":
        children.sort(key=lambda c: c["modified_at"], reverse=True)
    entries = [_entry(c, _child_path(loc.path, c["name"])) for c in children]
    return {"path": loc.path, **paginate(entries, limit=limit, offset=offset, key="entries")}


def _get_tree_asks(a: dict) -> list[str]:
    found = ["show me a tree of {path}", "draw the folder structure under {path}", "give me a tree view of {path}"]
    if "max_depth" in a:
        found += ["map out {path} to a depth of {max_depth}", "show {path} as a tree with depth {max_depth}"]
    if a.get("show_hidden"):
        found += ["show me a tree of {path} including hidden files",
                  "draw the full structure of {path}, dotfiles and all"]
        if "max_depth" in a:
            found.append("show {path} as a tree to a depth of {max_depth}, hidden files too")
    return _here(a, "path", found)


@server.tool(
    answers=("tree", "files", "directories"),
    read_only=True,
    reads=["directory", "file", "symlink"],
    errors=RESOLVE_ERRORS,
    examples=[{"path": "~/projects", "max_depth": 2}, {"path": "~", "max_depth": 1, "show_hidden": True}],
    asks=_get_tree_asks,
    values={"max_depth": lambda rng, s: rng.choice((1, 2, 3, 4))},
)
def get_tree(
    state: FsState,
    path: Annotated[str, ref("directory", f"Top directory of the tree: {_PATH_HELP}.")] = ".",
    max_depth: Annotated[int, Field(ge=1, le=8, description="How many levels below the top to show (1-8).")] = 2,
    show_hidden: Annotated[bool, Field(description="Include entries whose name starts with a dot.")] = False,
    max_entries: Annotated[int, Field(ge=1, le=1000, description="Stop after this many entries (1-1000).")] = 200,
) -> dict:
    """A tree view (like `tree`) of a directory down to max_depth: the rendered text, plus counts of
    directories and files shown and whether the listing was cut at max_entries. Directories the
    user may not read are marked [permission denied]. Fails with NOT_A_DIRECTORY, PERMISSION_DENIED
    or a path error."""
    loc = _locate(state, path)
    top = _require_directory(loc)
    user = _user(state)
    _require_access(user, top, "r", loc.path)
    lines, counts = [loc.path], {"directory": 0, "file": 0, "symlink": 0}
    truncated = False
    stack: list[tuple[Record, str, int, bool]] = []  # node, prefix, depth, last among siblings

    def push_children(node: Record, prefix: str, depth: int) -> None:
        kids = [c for c in _children(state, node) if show_hidden or not c["name"].startswith(".")]
        for i in reversed(range(len(kids))):
            stack.append((kids[i], prefix, depth, i == len(kids) - 1))

    push_children(top, "", 1)
    while stack:
        if sum(counts.values()) >= max_entries:
            truncated = True
            break
        node, prefix, depth, last = stack.pop()
        counts[node["kind"]] += 1
        label = node["name"] + {"directory": "/", "symlink": f" -> {node['target']}"}.get(node["kind"], "")
        readable = node["kind"] != "directory" or (_allowed(user, node, "r") and _allowed(user, node, "x"))
        lines.append(f"{prefix}{'└── ' if last else '├── '}{label}{'' if readable else '  [permission denied]'}")
        if node["kind"] == "directory" and readable and depth < max_depth:
            push_children(node, prefix + ("    " if last else "│   "), depth + 1)
    return {"path": loc.path, "tree": "\n".join(lines), "directories": counts["directory"],
            "files": counts["file"], "symlinks": counts["symlink"], "truncated": truncated}


def _make_directory_asks(a: dict) -> list[str]:
    found = ["create a folder at {path}", "make a new directory {path}", "add a directory {path}"]
    if "mode" in a:
        found.append("create the folder {path} with permissions {mode}")
    if a.get("parents"):
        found += ["create {path}, along with any missing parent folders", "run mkdir -p {path}"]
        if "mode" in a:
            found.append("create {path} with permissions {mode}, plus any missing parent folders")
    return found


@server.tool(
    idempotent=True,  # a repeat finds the directory there (ALREADY_EXISTS, or nothing to do with parents)
    reads=["directory"],
    produces=["directory"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS"],
    examples=[{"path": "~/projects/new-idea/src", "parents": True}, {"path": "~/Pictures/scans", "mode": "0700"}],
    asks=_make_directory_asks,
    values={"path": lambda rng, s: rng.choice(NEW_DIRECTORIES), "mode": lambda rng, s: rng.choice(DIRECTORY_MODES)},
)
def make_directory(
    state: FsState,
    path: NewPath,
    parents: Annotated[bool, Field(description="Also create missing parent directories, and succeed if the "
                                               "directory already exists (mkdir -p).")] = False,
    mode: Mode = "0755",
) -> dict:
    """Create a directory (mkdir), owned by the current user; with parents, missing ancestors too.
    Returns the path and every directory created. Fails with ALREADY_EXISTS (something is there;
    without parents also an existing directory), PATH_NOT_FOUND (a parent is missing and parents is
    false), NOT_A_DIRECTORY (a parent is a file), PERMISSION_DENIED (no write permission on the
    parent) or a path error."""
    parts = _absolute_parts(state, path)
    user = _user(state)
    if not parents:
        loc = _locate(state, _join(parts), must_exist=False)
        require(loc.node is None, f"{loc.path} already exists", reason="ALREADY_EXISTS", error=Conflict, path=loc.path)
        _require_create(user, loc)
        _create(state, loc, "directory", int(mode, 8))
        return {"path": loc.path, "created": [loc.path]}
    loc = _locate(state, "/")
    for depth, name in enumerate(parts):  # walk down to the first missing component
        step = _child_loc(state, loc, name)
        if step.node is not None and step.node["kind"] == "symlink":
            step = _locate(state, _join(parts[: depth + 1]), must_exist=False)
        if step.node is None:
            break
        if step.node["kind"] != "directory":
            require(depth < len(parts) - 1, f"{step.path} exists and is a {step.node['kind']}",
                    reason="ALREADY_EXISTS", error=Conflict, path=step.path)
            _require_directory(step)
        loc = step
    else:
        return {"path": loc.path, "created": []}  # mkdir -p on an existing directory
    _require_create(user, step)
    names = [step.name, *parts[depth + 1 :]]  # step.name differs from parts[depth] behind a dangling symlink
    created, parent, path = [], step.parent, _path_of_parent(step)
    for n, name in enumerate(names):
        path = _child_path(path, name)
        parent = _create(state, Loc(path, None, parent, name), "directory",
                         int(mode, 8) if n == len(names) - 1 else 0o755)  # ancestors get the default mode
        created.append(path)
    return {"path": created[-1], "created": created}


def _remove_directory_asks(a: dict) -> list[str]:
    found = ["remove {path}", "delete {path}", "get rid of {path}", "remove {path}; it's empty"]
    if a.get("recursive"):
        found += ["delete {path} and everything in it", "wipe out {path} with all its contents",
                  "remove {path} recursively, files and all"]
    return found


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (PATH_NOT_FOUND)
    reads=["directory"],
    mutates=["directory", "file", "user"],
    errors=[*RESOLVE_ERRORS, "DIRECTORY_NOT_EMPTY", "DIRECTORY_IN_USE", "OPERATION_NOT_PERMITTED"],
    examples=[_with_empty_dir, {"path": "~/notes/meetings", "recursive": True}],
    asks=_remove_directory_asks,
)
def remove_directory(
    state: FsState,
    path: DirPath,
    recursive: Annotated[bool, Field(description="Also delete everything inside (rm -r); otherwise the directory "
                                                 "must be empty (rmdir).")] = False,
) -> dict:
    """Delete a directory for good (no trash; see move_to_trash). Returns how many entries were
    removed and the bytes freed. Fails with DIRECTORY_NOT_EMPTY (pass recursive=true),
    NOT_A_DIRECTORY (a file or symlink: use delete_file), DIRECTORY_IN_USE (it holds the working
    directory), PERMISSION_DENIED (no write permission on its parent, or on a directory inside
    it), OPERATION_NOT_PERMITTED (the root) or a path error."""
    loc = _locate(state, path, follow=False)
    _require_directory(loc)
    _require_not_in_use(state, loc)
    user = _user(state)
    _require_unlink(user, loc)
    nodes = _subtree(state, loc.node)
    require(len(nodes) == 1 or recursive, f"{loc.path} holds {len(nodes) - 1} entries; pass recursive=true to "
            "delete them too", reason="DIRECTORY_NOT_EMPTY", path=loc.path, entries=len(nodes) - 1)
    for node, rel in nodes:
        if node["kind"] == "directory" and len(nodes) > 1:
            where = _under(loc.path, rel)
            for want in "rwx":
                _require_access(user, node, want, where)
    freed = _delete_nodes(state, [n for n, _ in nodes])
    state.nodes.update(loc.parent["id"], modified_at=_now(state))
    return {"path": loc.path, "removed_entries": len(nodes), "freed_bytes": freed}


@server.tool(
    answers=("total", "files", "directories"),
    read_only=True,
    reads=["directory", "file", "user"],
    errors=RESOLVE_ERRORS,
    examples=[{"path": "~"}, {"path": "~/Pictures"}],
    asks=("check how much disk space {path} takes up", "show the disk usage of {path}",
          "find out what's eating space in {path}", "list the {top} biggest things inside {path}",
          "show how big {path} is and its {top} largest entries"),
    values={"top": lambda rng, s: rng.choice((3, 5, 10, 15, 20))},
)
def get_disk_usage(
    state: FsState,
    path: Annotated[str, ref("directory", f"Directory to measure: {_PATH_HELP}.")] = ".",
    top: Annotated[int, Field(ge=1, le=50, description="How many of the largest entries inside to list.")] = 10,
) -> dict:
    """Disk usage of a directory (du): total bytes of the files under it, file and directory counts,
    its largest direct entries, how many subdirectories could not be read, and the current user's
    quota. Symlinks are not followed. Fails with NOT_A_DIRECTORY, PERMISSION_DENIED or a path
    error."""
    loc = _locate(state, path)
    node = _require_directory(loc)
    user = _user(state)
    _require_access(user, node, "r", loc.path)
    sizes: dict[str, int] = {}
    totals = {"files": 0, "directories": 0, "bytes": 0, "unreadable": 0}
    stack = [(c, c["name"]) for c in _children(state, node)]
    while stack:
        current, head = stack.pop()
        if current["kind"] == "file":
            totals["files"] += 1
            totals["bytes"] += current["size"]
            sizes[head] = sizes.get(head, 0) + current["size"]
        elif current["kind"] == "directory":
            totals["directories"] += 1
            sizes.setdefault(head, 0)
            if _allowed(user, current, "r") and _allowed(user, current, "x"):
                stack.extend((c, head) for c in _children(state, current))
            else:
                totals["unreadable"] += 1
    largest = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"path": loc.path, "total_bytes": totals["bytes"], "total": _human(totals["bytes"]),
            "files": totals["files"], "directories": totals["directories"],
            "largest": [{"path": _child_path(loc.path, name), "bytes": size, "size": _human(size)}
                        for name, size in largest],
            "unreadable_directories": totals["unreadable"], "quota": _quota_view(user)}
