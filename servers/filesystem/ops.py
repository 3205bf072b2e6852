"""Tree operations the tools share: creating, writing and deleting nodes with their permission,
size and quota checks, moving a subtree to the trash, and packing archives.
"""

from __future__ import annotations

from typing import Any

from prove_core.toolkit import PermissionDenied, Record, ResourceExhausted, require
from prove_servers.filesystem.access import _add, _charge, _require_access, _user
from prove_servers.filesystem.model import MAX_TEXT_FILE_BYTES, ROOT, FsState
from prove_servers.filesystem.nodes import _human, _insert_node, _now, _subtree, _text_fields
from prove_servers.filesystem.paths import Loc, _require_create, _require_existing, _under

# -- creating, writing and deleting nodes ----------------------------------------------------------


def _create(state: FsState, loc: Loc, kind: str, mode: int, **fields: Any) -> Record:
    """A new entry owned by the current user, stamped now; its directory's mtime moves too."""
    user = _user(state)
    now = _now(state)
    node = _insert_node(state, loc.parent, loc.name, kind, owner=user["id"], group=user["groups"][0], mode=mode,
                        when=now, **fields)
    state.nodes.update(loc.parent["id"], modified_at=now)
    return node


def _contains_cwd(state: FsState, top: Record) -> bool:
    node = state.nodes.get(state.get_var("cwd_id"))
    while True:
        if node["id"] == top["id"]:
            return True
        if node["parent_id"] is None:
            return False
        node = state.nodes.get(node["parent_id"])


def _require_not_in_use(state: FsState, loc: Loc) -> None:
    node = _require_existing(loc)
    require(node["parent_id"] is not None, "the root directory cannot be removed", reason="OPERATION_NOT_PERMITTED",
            error=PermissionDenied, path="/")
    require(not (node["kind"] == "directory" and _contains_cwd(state, node)),
            f"{loc.path} holds the working directory; change_directory elsewhere first", reason="DIRECTORY_IN_USE",
            path=loc.path)


def _file_bytes(nodes: list[Record]) -> dict[str, int]:
    """Bytes per owner in these nodes (what deleting them frees)."""
    owned: dict[str, int] = {}
    for node in nodes:
        if node["kind"] == "file":
            _add(owned, node["owner"], node["size"])
    return owned


def _delete_nodes(state: FsState, nodes: list[Record]) -> int:
    freed = _file_bytes(nodes)
    _charge(state, {owner: -size for owner, size in freed.items()})
    for node in nodes:
        state.nodes.delete(node["id"])
    return sum(freed.values())


def _set_text(state: FsState, loc: Loc, content: str) -> Record:
    """Replace a file's content after the size and quota checks; unchanged content writes nothing."""
    node = _require_existing(loc)
    size = len(content.encode())
    require(size <= MAX_TEXT_FILE_BYTES, f"{loc.path} would be {_human(size)}; text files are limited to "
            f"{_human(MAX_TEXT_FILE_BYTES)}", reason="FILE_TOO_LARGE", error=ResourceExhausted, path=loc.path,
            size=size, limit=MAX_TEXT_FILE_BYTES)
    if not node["binary"] and node["content"] == content:
        return node
    _charge(state, {node["owner"]: size - node["size"]})
    return state.nodes.update(node["id"], **_text_fields(node["name"], content), modified_at=_now(state))


def _new_text_file(state: FsState, loc: Loc, content: str, mode: int) -> Record:
    """Create a text file at a free location after the permission, size and quota checks."""
    user = _user(state)
    _require_create(user, loc)
    size = len(content.encode())
    require(size <= MAX_TEXT_FILE_BYTES, f"{loc.path} would be {_human(size)}; text files are limited to "
            f"{_human(MAX_TEXT_FILE_BYTES)}", reason="FILE_TOO_LARGE", error=ResourceExhausted, path=loc.path,
            size=size, limit=MAX_TEXT_FILE_BYTES)
    _charge(state, {user["id"]: size})
    return _create(state, loc, "file", mode, **_text_fields(loc.name, content))


# -- archives --------------------------------------------------------------------------------------

_COPIED_FIELDS = ("kind", "mode", "size", "content", "binary", "mime", "sha256", "target", "meta")


def _copied(record: Record) -> Record:
    """What a copy or an extracted entry takes over from its source (the kind aside)."""
    return {f: record[f] for f in _COPIED_FIELDS if f != "kind"}


def _archive_entries(state: FsState, top: Record, top_name: str, user: Record | None, top_path: str) -> list[Record]:
    """Entries for one source of an archive; with a ``user``, every file must be readable and
    every directory listable by them."""
    entries = []
    for node, rel in _subtree(state, top):
        path = _under(top_path, rel)
        if user is not None and node["kind"] != "symlink":
            _require_access(user, node, "r", path)
            if node["kind"] == "directory":
                _require_access(user, node, "x", path)
        entries.append({"path": "/".join([top_name, *rel]), **{f: node[f] for f in _COPIED_FIELDS}})
    return entries


def _compressed(entries: list[Record]) -> int:
    """What the archive weighs: text deflates to about a third, media barely at all."""
    total = 0
    for e in entries:
        total += 40  # header per entry
        if e["kind"] == "file":
            total += int(e["size"] * 0.98) if e["binary"] else max(16, int(e["size"] * 0.35))
    return total


def _archive_view(archive: Record) -> dict[str, Any]:
    return {k: v for k, v in archive.items() if k != "entries"}


def _owned_archive(state: FsState, archive_id: str) -> Record:
    archive = state.archives.get(archive_id)
    user = _user(state)
    require(user["id"] in (ROOT, archive["owner"]), f"archive {archive_id} belongs to {archive['owner']}",
            reason="PERMISSION_DENIED", error=PermissionDenied, archive_id=archive_id)
    return archive


# -- records the seed writes too -------------------------------------------------------------------


def _insert_archive(state: FsState, owner: str, name: str, fmt: str, sources: list[str], entries: list[Record],
                    when: str) -> Record:
    return state.archives.insert({
        "name": name, "file_name": f"{name}.{fmt}", "format": fmt, "owner": owner, "created_at": when,
        "sources": sources, "entry_count": len(entries),
        "total_bytes": sum(e["size"] for e in entries if e["kind"] == "file"), "size": _compressed(entries),
        "entries": entries,
    })


def _trash(state: FsState, node: Record, original: str, owner: str, when: str) -> Record:
    """Detach a subtree into the owner's trash: only its top node changes, however big it is (the
    subtree is walked once, to report its size)."""
    nodes = [n for n, _ in _subtree(state, node)]
    item = state.trash.insert({
        "owner": owner, "name": node["name"], "original_path": original, "type": node["kind"],
        "size": sum(n["size"] for n in nodes if n["kind"] == "file"), "item_count": len(nodes), "trashed_at": when,
        "node_id": node["id"],
    })
    state.nodes.update(node["id"], parent_id=None, dirent=None, trash_id=item["id"])
    return item
