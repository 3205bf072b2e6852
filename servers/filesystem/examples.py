"""Tool examples computed from the live state, so they hold for any seed.

The conformance kit also runs every example one after another in a single session, so these
helpers never raise: they fall back to paths that exist in any state, and ``_quietly`` prepares
what an example needs unless it is already there (calling the tool through ``server.tools``, so
this module needs none of the tool modules, which import it).
"""

from __future__ import annotations

from typing import Any

from prove_core.toolkit import ToolError
from prove_servers.filesystem.app import server
from prove_servers.filesystem.model import FsState
from prove_servers.filesystem.nodes import _children
from prove_servers.filesystem.paths import _locate


def _quietly(tool: str, state: FsState, *args: Any) -> None:
    try:
        server.tools[tool].fn(state, *args)
    except ToolError:
        pass  # already there, or not possible in this state: the example call will say so


def _names_in(s: FsState, path: str) -> list[str]:
    try:
        return [n["name"] for n in _children(s, _locate(s, path).node)]
    except ToolError:
        return []


def _project(s: FsState) -> str:
    """~/projects/<first project>, the target of ~/current-project."""
    try:
        return f"~/{_locate(s, '~/current-project', follow=False).node['target']}"
    except ToolError:
        return "~/projects"


def _python_file(s: FsState) -> str:
    for project in _names_in(s, "~/projects"):
        package = project.replace("-", "_")
        if package in _names_in(s, f"~/projects/{project}/src"):
            return f"~/projects/{project}/src/{package}/core.py"
    return "~/.bashrc"


def _meetings(s: FsState) -> list[str]:
    return [f"~/notes/meetings/{name}" for name in _names_in(s, "~/notes/meetings")] or ["~/.bashrc", "~/.profile"]


def _photo(s: FsState) -> str:
    for album in _names_in(s, "~/Pictures"):
        for name in _names_in(s, f"~/Pictures/{album}"):
            return f"~/Pictures/{album}/{name}"
    return "~/Downloads/lease-2026.pdf"


def _my_archive(s: FsState) -> str:
    if s.archives.first(owner=s.get_var("user")) is None:
        _quietly("create_archive", s, "example-backup", ["~/.bashrc"])
    archive = s.archives.first(owner=s.get_var("user"))
    return archive["id"] if archive else "arc_none"


def _my_trash(s: FsState) -> str:
    if s.trash.first(owner=s.get_var("user")) is None:
        _quietly("create_file", s, "~/discarded.txt", "an old note\n")
        _quietly("move_to_trash", s, "~/discarded.txt")
    item = s.trash.first(owner=s.get_var("user"))
    return item["id"] if item else "trs_none"


def _with_empty_dir(s: FsState) -> dict[str, Any]:
    _quietly("make_directory", s, "~/empty-dir")
    return {"path": "~/empty-dir"}


def _edited_copy(s: FsState) -> dict[str, Any]:
    first = _meetings(s)[0]
    _quietly("copy_path", s, first, "~/standup-draft.md")
    _quietly("edit_file", s, "~/standup-draft.md", "## Updates", "## Updates\n- demo went well")
    return {"path_a": first, "path_b": "~/standup-draft.md"}
