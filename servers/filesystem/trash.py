"""Tools: the trash (move to, list, restore, empty)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from prove_core.toolkit import Conflict, PermissionDenied, Record, paginate, ref, require
from prove_servers.filesystem.access import _user
from prove_servers.filesystem.app import RESTORE_PATHS, AnyPath, Limit, Offset, TrashId, server
from prove_servers.filesystem.examples import _my_trash, _project
from prove_servers.filesystem.model import RESOLVE_ERRORS, FsState
from prove_servers.filesystem.nodes import _now, _renamed_mime, _subtree
from prove_servers.filesystem.ops import _delete_nodes, _require_not_in_use, _trash
from prove_servers.filesystem.paths import _locate, _require_create, _require_unlink


def _item_view(item: Record) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "node_id"}


@server.tool(
    idempotent=True,  # a repeat finds nothing at the path (PATH_NOT_FOUND)
    reads=["file", "directory"],
    produces=["trash_item"],
    mutates=["file", "directory", "symlink"],
    errors=[*RESOLVE_ERRORS, "DIRECTORY_IN_USE", "OPERATION_NOT_PERMITTED"],
    examples=[{"path": "~/Downloads/wifi-setup.txt"}, lambda s: {"path": _project(s)}],
    asks=("move {path} to the trash", "trash {path}", "throw {path} in the bin so I can get it back later",
          "send {path} to the trash instead of deleting it"),
)
def move_to_trash(state: FsState, path: AnyPath) -> dict:
    """Move a file, symlink or whole directory to your trash, from where restore_from_trash can put it
    back; it keeps counting against its owner's quota until the trash is emptied. Returns the trash
    item (id, original path, type, bytes, entry count). Fails with DIRECTORY_IN_USE (it holds the
    working directory), PERMISSION_DENIED (no write permission on its directory; sticky /tmp),
    OPERATION_NOT_PERMITTED (the root) or a path error."""
    loc = _locate(state, path, follow=False)
    _require_not_in_use(state, loc)
    user = _user(state)
    _require_unlink(user, loc)
    item = _trash(state, loc.node, loc.path, user["id"], _now(state))
    state.nodes.update(loc.parent["id"], modified_at=_now(state))
    return _item_view(item)


@server.tool(
    answers=("original_path", "trashed_at", "size"),
    read_only=True,
    reads=["trash_item"],
    examples=[{}],
    asks=("show what's in my trash", "list the items in the trash", "list everything I've thrown in the trash",
          "show how much space my trash is taking and what's in it"),
)
def list_trash(state: FsState, limit: Limit = 20, offset: Offset = 0) -> dict:
    """Items in your trash, most recently trashed first: id, name, original path, type, bytes, entry
    count and when it was trashed; plus the bytes the trash holds. Paged."""
    items = sorted(state.trash.where(owner=state.get_var("user")), key=lambda i: i["trashed_at"], reverse=True)
    return {**paginate([_item_view(i) for i in items], limit=limit, offset=offset, key="items"),
            "total_bytes": sum(i["size"] for i in items)}


def _own_trash_item(state: FsState, trash_id: str) -> Record:
    item = state.trash.get(trash_id)
    require(item["owner"] == state.get_var("user"), f"trash item {trash_id} is in {item['owner']}'s trash",
            reason="PERMISSION_DENIED", error=PermissionDenied, trash_id=trash_id)
    return item


@server.tool(
    idempotent=True,  # a repeat finds the item gone (TRASH_ITEM_NOT_FOUND)
    destructive=True,  # the trash entry is deleted once its item is back
    reads=["trash_item", "directory"],
    mutates=["trash_item", "file", "directory"],
    errors=[*RESOLVE_ERRORS, "TRASH_ITEM_NOT_FOUND", "ALREADY_EXISTS"],
    examples=[lambda s: {"trash_id": _my_trash(s)},
              lambda s: {"trash_id": _my_trash(s), "destination": "~/notes/recovered.txt"}],
    asks=("restore {trash_id}", "put {trash_id} back where it was", "bring {trash_id} back out of the trash",
          "restore {trash_id} to {destination}", "recover {trash_id} and save it as {destination}"),
    values={"destination": lambda rng, s: rng.choice(RESTORE_PATHS)},
)
def restore_from_trash(
    state: FsState,
    trash_id: TrashId,
    destination: Annotated[str | None, Field(description="Where to put it back (its full new path); its original "
                                                         "path when omitted.")] = None,
) -> dict:
    """Put a trashed item back where it was, or at destination. Returns the restored path. Fails with
    TRASH_ITEM_NOT_FOUND, PERMISSION_DENIED (someone else's trash, or no write permission on the
    directory), ALREADY_EXISTS (something now occupies the path: pass another destination),
    PATH_NOT_FOUND (its old directory is gone) or a path error (INVALID_PATH, PATH_OUTSIDE_ROOT,
    NOT_A_DIRECTORY, SYMLINK_LOOP)."""
    item = _own_trash_item(state, trash_id)
    loc = _locate(state, destination or item["original_path"], follow=False, must_exist=False)
    require(loc.node is None, f"{loc.path} is taken; restore to another destination", reason="ALREADY_EXISTS",
            error=Conflict, path=loc.path)
    _require_create(_user(state), loc)
    node = state.nodes.get(item["node_id"])
    state.nodes.update(node["id"], parent_id=loc.parent["id"], name=loc.name, dirent=f"{loc.parent['id']}/{loc.name}",
                       trash_id=None, mime=_renamed_mime(node, loc.name))
    state.nodes.update(loc.parent["id"], modified_at=_now(state))
    state.trash.delete(trash_id)
    return {"trash_id": trash_id, "restored_path": loc.path, "type": node["kind"], "entries": item["item_count"]}


def _empty_trash_asks(a: dict) -> list[str]:
    found = ["empty my trash", "clear out the trash for good", "permanently delete everything in the trash"]
    if a.get("trash_id"):
        found += ["permanently delete {trash_id} from the trash", "purge {trash_id} from my trash for good",
                  "remove {trash_id} from the trash permanently"]
    return found


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing left to delete
    reads=["trash_item"],
    mutates=["trash_item", "file", "user"],
    errors=["TRASH_ITEM_NOT_FOUND", "PERMISSION_DENIED"],
    examples=[{}, lambda s: {"trash_id": _my_trash(s)}],
    asks=_empty_trash_asks,
)
def empty_trash(
    state: FsState,
    trash_id: Annotated[str | None, ref("trash_item", "Delete only this item (trs_...); the whole trash when "
                                                      "omitted.")] = None,
) -> dict:
    """Delete trashed items for good and free their space: one item, or your whole trash. Returns how
    many items and entries were deleted and the bytes freed. Fails with TRASH_ITEM_NOT_FOUND or
    PERMISSION_DENIED (someone else's trash item)."""
    items = [_own_trash_item(state, trash_id)] if trash_id else state.trash.where(owner=state.get_var("user"))
    entries = freed = 0
    for item in items:
        nodes = [n for n, _ in _subtree(state, state.nodes.get(item["node_id"]))]
        entries += len(nodes)
        freed += _delete_nodes(state, nodes)
        state.trash.delete(item["id"])
    return {"deleted_items": len(items), "deleted_entries": entries, "freed_bytes": freed}
