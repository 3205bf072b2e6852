"""Users, permissions and quota: POSIX owner/group/other checks against the signed-in user (root
bypasses them) and the byte quota charged to owners.
"""

from __future__ import annotations

from typing import Any

from prove_core.toolkit import PermissionDenied, Record, ResourceExhausted, require
from prove_servers.filesystem.model import ROOT, FsState
from prove_servers.filesystem.nodes import _human, _permissions


def _user(state: FsState) -> Record:
    return state.users.get(state.get_var("user"))


def _allowed(user: Record, node: Record, want: str) -> bool:
    if user["id"] == ROOT:
        return True
    mode = node["mode"]
    if node["owner"] == user["id"]:
        bits = mode >> 6
    elif node["group"] in user["groups"]:
        bits = mode >> 3
    else:
        bits = mode
    return bool(bits & {"r": 4, "w": 2, "x": 1}[want])


_VERBS = {"r": "read", "w": "write", "x": "search (x)"}


def _require_access(user: Record, node: Record, want: str, path: str) -> None:
    if not _allowed(user, node, want):
        raise PermissionDenied(
            f"{path}: {_VERBS[want]} permission denied for {user['id']} "
            f"({_permissions(node)} {node['owner']}:{node['group']})",
            reason="PERMISSION_DENIED", path=path, needs=want)


def _require_owner(user: Record, node: Record, path: str, action: str) -> None:
    require(user["id"] in (ROOT, node["owner"]), f"only {node['owner']} (the owner) or root may {action} {path}",
            reason="OPERATION_NOT_PERMITTED", error=PermissionDenied, path=path, owner=node["owner"])


def _charge(state: FsState, deltas: dict[str, int]) -> None:
    """Check every owner's quota for the growth, then book the changes. Call it after every
    other check: it is the last thing that may refuse."""
    for owner, delta in deltas.items():
        user = state.users.get(owner)
        quota = user["quota_bytes"]
        if delta > 0 and quota is not None and user["used_bytes"] + delta > quota:
            free = max(0, quota - user["used_bytes"])
            raise ResourceExhausted(
                f"{owner}'s quota is {_human(quota)} with {_human(free)} free; this needs {_human(delta)}. "
                "Delete files or empty the trash first",
                reason="QUOTA_EXCEEDED", user=owner, quota_bytes=quota, used_bytes=user["used_bytes"], needed_bytes=delta)
    for owner, delta in deltas.items():
        if delta:
            state.users.update(owner, used_bytes=state.users.get(owner)["used_bytes"] + delta)


def _add(deltas: dict[str, int], owner: str, amount: int) -> None:
    deltas[owner] = deltas.get(owner, 0) + amount


def _quota_view(user: Record) -> dict[str, Any]:
    quota = user["quota_bytes"]
    return {"user": user["id"], "used_bytes": user["used_bytes"], "quota_bytes": quota,
            "available_bytes": None if quota is None else max(0, quota - user["used_bytes"]),
            "percent_used": None if not quota else round(100 * user["used_bytes"] / quota, 1),
            "used": _human(user["used_bytes"]), "quota": "unlimited" if quota is None else _human(quota)}
