"""Node records: the one shape of an inode (file, directory or symlink), how tools show it
(``ls -l`` entries, permission strings, sizes) and walks over a directory's subtree.
"""

from __future__ import annotations

import hashlib
from typing import Any

from prove_core.toolkit import Record, iso_datetime
from prove_servers.filesystem.model import MIME_TYPES, FsState


def _human(size: int) -> str:
    value = float(min(size, 2**80))  # float() of a huge int overflows; no real size is near 2**80
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _mode_text(mode: int) -> str:
    return f"{mode:04o}"


def _permissions(node: Record) -> str:
    mode = node["mode"]
    out = {"directory": "d", "symlink": "l"}.get(node["kind"], "-")
    for shift in (6, 3, 0):
        bits = mode >> shift
        out += ("r" if bits & 4 else "-") + ("w" if bits & 2 else "-") + ("x" if bits & 1 else "-")
    if mode & 0o1000:
        out = out[:-1] + ("t" if mode & 1 else "T")
    return out


def _entry(node: Record, path: str) -> dict[str, Any]:
    out = {"name": node["name"] or "/", "path": path, "type": node["kind"], "size": node["size"],
           "mode": _mode_text(node["mode"]), "permissions": _permissions(node), "owner": node["owner"],
           "group": node["group"], "modified_at": node["modified_at"]}
    if node["kind"] == "symlink":
        out["target"] = node["target"]
    return out


def _mime(name: str, kind: str = "file") -> str | None:
    if kind != "file":
        return None
    dot = name.rfind(".")
    return MIME_TYPES.get(name[dot:].lower() if dot > 0 else "", "application/octet-stream" if dot > 0 else "text/plain")


def _renamed_mime(node: Record, name: str) -> str | None:
    """A text file's type follows its extension; a photo stays a photo whatever it is called."""
    return node["mime"] if node["binary"] else _mime(name, node["kind"])


def _text_fields(name: str, content: str) -> dict[str, Any]:
    return {"content": content, "size": len(content.encode()), "binary": False, "sha256": None,
            "mime": _mime(name)}


def _sha256(node: Record) -> str:
    if node["binary"]:
        return node["sha256"]
    return hashlib.sha256((node["content"] or "").encode()).hexdigest()


def _insert_node(state: FsState, parent: Record | None, name: str, kind: str, *, owner: str, group: str,
                 when: str, **fields: Any) -> Record:
    """The one shape of a node record (``parent`` None only for the root)."""
    record = {"parent_id": parent and parent["id"], "name": name,
              "dirent": parent and f"{parent['id']}/{name}", "kind": kind,
              "owner": owner, "group": group, "mode": 0o644, "size": 0, "content": None, "binary": False,
              "mime": _mime(name, kind), "sha256": None, "target": None, "meta": None,
              "created_at": when, "modified_at": when, "trash_id": None}
    record.update(fields)
    return state.nodes.insert(record)


def _now(state: FsState) -> str:
    return iso_datetime(state.now())


def _children(state: FsState, directory: Record) -> list[Record]:
    return sorted(state.nodes.where(parent_id=directory["id"]), key=lambda n: n["name"])


def _subtree(state: FsState, top: Record) -> list[tuple[Record, list[str]]]:
    """Every node under ``top`` (itself first) with its path relative to it, in name order."""
    out: list[tuple[Record, list[str]]] = []
    stack: list[tuple[Record, list[str]]] = [(top, [])]
    while stack:
        node, rel = stack.pop()
        out.append((node, rel))
        if node["kind"] == "directory":
            stack.extend((child, [*rel, child["name"]]) for child in reversed(_children(state, node)))
    return out


def _lines(content: str) -> list[str]:
    return content.splitlines()
