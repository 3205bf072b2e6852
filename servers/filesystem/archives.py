"""Tools: archives (create, list, list entries, extract)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from prove_core.toolkit import Conflict, Record, ResourceExhausted, paginate, ref, require
from prove_servers.filesystem.access import _add, _charge, _require_access, _user
from prove_servers.filesystem.app import _PATH_HELP, ARCHIVES, ArchiveId, Limit, Offset, _here, server
from prove_servers.filesystem.examples import _my_archive, _project
from prove_servers.filesystem.model import MAX_ARCHIVE_ENTRIES, RESOLVE_ERRORS, FsState, _outside
from prove_servers.filesystem.nodes import _insert_node, _mode_text, _now
from prove_servers.filesystem.ops import (
    _archive_entries,
    _archive_view,
    _compressed,
    _copied,
    _insert_archive,
    _owned_archive,
)
from prove_servers.filesystem.paths import (
    Loc,
    _child_loc,
    _link_parts,
    _locate,
    _require_create,
    _require_directory,
    _require_existing,
    _require_unlink,
    _under,
)


@server.tool(
    idempotent=True,  # a repeat is refused: the name is taken (ALREADY_EXISTS)
    reads=["file", "directory"],
    produces=["archive"],
    mutates=["user"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "DUPLICATE_ENTRY", "TOO_MANY_ENTRIES", "QUOTA_EXCEEDED"],
    examples=[lambda s: {"name": "project-snapshot", "paths": [_project(s)]},
              {"name": "notes-2026", "paths": ["~/notes/todo.md", "~/notes/ideas.md"], "format": "tar.gz"}],
    asks=("zip up {paths} into an archive called {name}", "pack {paths} into a new archive named {name}",
          "back up {paths} as an archive called {name}", "make a {format} archive named {name} from {paths}",
          "bundle {paths} into {name} as a {format} file"),
    values={"name": lambda rng, s: rng.choice(ARCHIVES)[0], "paths": lambda rng, s: list(rng.choice(ARCHIVES)[1])},
)
def create_archive(
    state: FsState,
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
                               description="Archive name, unique among your archives, e.g. photos-2026.")],
    paths: Annotated[list[str], Field(min_length=1, max_length=20, description="Files and directories to pack "
                                                                               "(directories recursively).")],
    format: Annotated[Literal["zip", "tar.gz"], Field(description="Archive format.")] = "zip",
) -> dict:
    """Pack files and directories into a new archive you own (zip -r): each source is stored under
    its own name with everything inside. Its compressed size counts against your quota. Returns the
    archive (id, name, format, entry count, total and compressed bytes). Fails with ALREADY_EXISTS
    (you have an archive of that name), DUPLICATE_ENTRY (two sources with the same name),
    TOO_MANY_ENTRIES (over 2000), PERMISSION_DENIED (a source cannot be read), QUOTA_EXCEEDED or a
    path error (INVALID_PATH, PATH_OUTSIDE_ROOT, PATH_NOT_FOUND, NOT_A_DIRECTORY, SYMLINK_LOOP)."""
    user = _user(state)
    clash = state.archives.first(owner=user["id"], name=name)
    require(clash is None, f"you already have an archive named {name} ({clash and clash['id']})",
            reason="ALREADY_EXISTS", error=Conflict, archive_id=clash and clash["id"])
    entries: list[Record] = []
    tops: dict[str, str] = {}
    for raw in paths:
        loc = _locate(state, raw)
        node = _require_existing(loc)
        top_name = node["name"] or "root"
        require(top_name not in tops, f"{loc.path} and {tops.get(top_name)} would both be stored as {top_name}",
                reason="DUPLICATE_ENTRY", error=Conflict, name=top_name)
        tops[top_name] = loc.path
        entries += _archive_entries(state, node, top_name, user, loc.path)
        require(len(entries) <= MAX_ARCHIVE_ENTRIES, f"archives hold at most {MAX_ARCHIVE_ENTRIES} entries",
                reason="TOO_MANY_ENTRIES", error=ResourceExhausted, limit=MAX_ARCHIVE_ENTRIES)
    size = _compressed(entries)
    _charge(state, {user["id"]: size})
    sources = [tops[t] for t in tops]
    return _archive_view(_insert_archive(state, user["id"], name, format, sources, entries, _now(state)))


@server.tool(
    answers=("format", "entry_count", "total_bytes"),
    read_only=True,
    reads=["archive"],
    examples=[{}, {"limit": 1}],
    asks=("list my archives", "show the archives I've made", "show me all the backup archives I keep",
          "show me up to {limit} of my archives"),
)
def list_archives(state: FsState, limit: Limit = 20, offset: Offset = 0) -> dict:
    """Your archives, oldest first: id, name, file name, format, sources, entry count, total and
    compressed bytes, creation time. Paged."""
    mine = [_archive_view(a) for a in state.archives.where(owner=state.get_var("user"))]
    return paginate(mine, limit=limit, offset=offset, key="archives")


@server.tool(
    answers=("path", "size"),
    read_only=True,
    reads=["archive"],
    errors=["ARCHIVE_NOT_FOUND", "PERMISSION_DENIED"],
    examples=[lambda s: {"archive_id": _my_archive(s)}],
    asks=("list what's inside {archive_id}", "show the contents of {archive_id}",
          "tell me which files are packed in {archive_id}", "show me what got saved in {archive_id}"),
)
def list_archive_entries(state: FsState, archive_id: ArchiveId, limit: Limit = 50, offset: Offset = 0) -> dict:
    """The entries packed in one of your archives: relative path, type, size, mode and, for
    symlinks, the target. Paged. Fails with ARCHIVE_NOT_FOUND or PERMISSION_DENIED (another
    user's archive)."""
    archive = _owned_archive(state, archive_id)
    entries = [{"path": e["path"], "type": e["kind"], "size": e["size"], "mode": _mode_text(e["mode"]),
                **({"target": e["target"]} if e["kind"] == "symlink" else {})} for e in archive["entries"]]
    return {"archive_id": archive_id, "name": archive["name"],
            **paginate(entries, limit=limit, offset=offset, key="entries")}


def _extract_archive_asks(a: dict) -> list[str]:
    found = ["extract {archive_id} into {destination}", "unpack {archive_id} to {destination}",
             "unzip {archive_id} in {destination}", "restore the files from {archive_id} into {destination}"]
    if a.get("overwrite"):
        found += ["extract {archive_id} into {destination}, overwriting existing files",
                  "unpack {archive_id} to {destination} and replace anything in the way"]
    return _here(a, "destination", found)


@server.tool(
    destructive=True,  # with overwrite, replaces files that are in the way
    idempotent=True,  # a repeat finds the files there (ALREADY_EXISTS) or rewrites identical content
    reads=["archive", "directory"],
    produces=["file", "directory", "symlink"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "ARCHIVE_NOT_FOUND", "ALREADY_EXISTS", "QUOTA_EXCEEDED"],
    examples=[lambda s: {"archive_id": _my_archive(s), "destination": "~/Documents"}],
    asks=_extract_archive_asks,
)
def extract_archive(
    state: FsState,
    archive_id: ArchiveId,
    destination: Annotated[str, ref("directory", f"Existing directory to unpack into: {_PATH_HELP}.")] = ".",
    overwrite: Annotated[bool, Field(description="Replace existing files that are in the way.")] = False,
) -> dict:
    """Unpack one of your archives into a directory: existing directories are reused, missing ones
    created; extracted files belong to you and count against your quota. Nothing is written unless
    every entry can be. Returns how many entries were created and replaced, and the first paths.
    Fails with ARCHIVE_NOT_FOUND, PERMISSION_DENIED (another user's archive, or no write permission
    where entries go), ALREADY_EXISTS (something is in the way: pass overwrite to replace files and
    links of the same kind; a directory never gives way), NOT_A_DIRECTORY, PATH_OUTSIDE_ROOT (an
    entry would land, or a symlink entry point, outside the tree), QUOTA_EXCEEDED or a path
    error."""
    archive = _owned_archive(state, archive_id)
    top = _locate(state, destination)
    _require_directory(top)
    user = _user(state)
    # Plan every entry before writing anything. Entries come parent first; a directory maps to
    # its existing Loc, or None when the extraction creates it.
    dirs: dict[str, Loc | None] = {"": top}
    creates: list[tuple[Record, str]] = []
    replaces: list[tuple[Record, Record]] = []
    deltas: dict[str, int] = {}
    for entry in archive["entries"]:
        parent_rel, _, name = entry["path"].rpartition("/")
        if any(part in ("", ".", "..") for part in entry["path"].split("/")):  # no zip-slip, whoever wrote it
            raise _outside(f"archive entry {entry['path']!r} would land outside {top.path}", entry=entry["path"])
        path = _under(top.path, entry["path"].split("/"))
        if entry["kind"] == "symlink":
            _link_parts(path.strip("/").split("/")[:-1], entry["target"])  # no entry may point outside the tree
        parent = dirs[parent_rel]
        here = None if parent is None else _child_loc(state, parent, name)
        if here is None or here.node is None:
            if here is not None:
                _require_create(user, here)
            creates.append((entry, path))
            if entry["kind"] == "directory":
                dirs[entry["path"]] = None
            else:
                _add(deltas, user["id"], entry["size"])
            continue
        node = here.node
        if entry["kind"] == node["kind"] == "directory":
            dirs[entry["path"]] = here
            continue
        require(overwrite and entry["kind"] == node["kind"], f"{path} already exists as a {node['kind']}" +
                ("; pass overwrite=true to replace it" if entry["kind"] == node["kind"] else ""),
                reason="ALREADY_EXISTS", error=Conflict, path=path)
        if node["kind"] == "file":
            _require_access(user, node, "w", path)
            _add(deltas, node["owner"], entry["size"] - node["size"])
        else:
            _require_unlink(user, here)
        replaces.append((entry, node))
    _charge(state, deltas)
    now, made = _now(state), {}
    for entry, _path in creates:
        parent_rel, _, name = entry["path"].rpartition("/")
        parent_loc = dirs[parent_rel]
        parent = parent_loc.node if parent_loc is not None else made[parent_rel]
        made[entry["path"]] = _insert_node(state, parent, name, entry["kind"], owner=user["id"],
                                           group=user["groups"][0], when=now,
                                           **_copied(entry))
    replaced = 0
    for entry, node in replaces:
        fields = _copied(entry)
        if any(node[k] != v for k, v in fields.items()):  # identical content stays untouched
            state.nodes.update(node["id"], **fields, modified_at=now)
            replaced += 1
    return {"archive_id": archive_id, "destination": top.path, "created": len(creates), "replaced": replaced,
            "paths": [path for _, path in creates[:50]]}
