"""Tools: files (create, read, write, append, edit, truncate, delete, touch, info, exists)."""

from __future__ import annotations

import difflib
from typing import Annotated

from pydantic import Field

from prove_core.toolkit import Conflict, ResourceExhausted, ToolError, require
from prove_servers.filesystem.access import _allowed, _require_access, _user
from prove_servers.filesystem.app import (
    _PATH_HELP,
    FILE_MODES,
    HEADINGS,
    NEW_FILES,
    TODO_LINES,
    TRUNCATE_SIZES,
    AnyPath,
    Content,
    FilePath,
    FollowLinks,
    Mode,
    NewPath,
    server,
)
from prove_servers.filesystem.examples import _photo, _project
from prove_servers.filesystem.model import MAX_TEXT_FILE_BYTES, MAX_WRITE_CHARS, RESOLVE_ERRORS, ROOT, FsState
from prove_servers.filesystem.nodes import _entry, _human, _now
from prove_servers.filesystem.ops import _delete_nodes, _new_text_file, _set_text
from prove_servers.filesystem.paths import (
    _locate,
    _require_existing,
    _require_file,
    _require_unlink,
    _target_report,
    _text_of,
)


@server.tool(
    idempotent=True,  # a repeat is refused with ALREADY_EXISTS
    reads=["directory"],
    produces=["file"],
    mutates=["user"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "FILE_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[{"path": "~/notes/groceries.md", "content": "- oat milk\n- coffee beans\n"},
              {"path": "/tmp/empty.txt"}],
    asks=("create a new file at {path}", "make an empty file {path}", 'create {path} with the text "{content}"',
          'start a new file {path} that says "{content}"', "create the file {path} with permissions {mode}"),
    values={"path": lambda rng, s: rng.choice(NEW_FILES)[0], "content": lambda rng, s: rng.choice(NEW_FILES)[1],
            "mode": lambda rng, s: rng.choice(FILE_MODES)},
)
def create_file(
    state: FsState,
    path: NewPath,
    content: Annotated[str, Field(max_length=MAX_WRITE_CHARS, description="Initial text (UTF-8); empty by "
                                                                          "default.")] = "",
    mode: Mode = "0644",
) -> dict:
    """Create a new text file owned by the current user; never overwrites (see write_file). Returns
    the new file's details. Fails with ALREADY_EXISTS (any entry there, a symlink included),
    PATH_NOT_FOUND (its directory is missing), PERMISSION_DENIED (no write permission on the
    directory), FILE_TOO_LARGE, QUOTA_EXCEEDED or a path error."""
    loc = _locate(state, path, follow=False, must_exist=False)
    require(loc.node is None, f"{loc.path} already exists", reason="ALREADY_EXISTS", error=Conflict, path=loc.path)
    node = _new_text_file(state, loc, content, int(mode, 8))
    return _entry(node, loc.path)


@server.tool(
    answers=("content",),
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE"],
    examples=[lambda s: {"path": f"{_project(s)}/README.md"}, {"path": "~/notes/todo.md", "offset": 2, "limit": 3}],
    asks=("open {path} and show me what it says", "read {path}", "show me the contents of {path}",
          "skip the first {offset} lines of {path} and show me the next {limit}",
          "read {limit} lines of {path}"),
)
def read_file(
    state: FsState,
    path: FilePath,
    offset: Annotated[int, Field(ge=0, description="Lines to skip from the start (0 reads from line 1).")] = 0,
    limit: Annotated[int, Field(ge=1, le=2000, description="Most lines to return (1-2000).")] = 500,
) -> dict:
    """Read a text file, a window of lines at a time. Returns the text of the lines read, the first
    line's number, how many lines came back, the file's total lines and size, and next_offset
    (null at the end). Needs read permission. Fails with IS_A_DIRECTORY, BINARY_FILE (photos, PDFs:
    use get_file_info), PERMISSION_DENIED or a path error."""
    loc = _locate(state, path)
    content = _text_of(loc)
    _require_access(_user(state), loc.node, "r", loc.path)
    lines = content.splitlines(keepends=True)
    window = lines[offset : offset + limit]
    return {"path": loc.path, "content": "".join(window), "start_line": offset + 1, "lines_returned": len(window),
            "total_lines": len(lines), "size": loc.node["size"],
            "next_offset": offset + limit if offset + limit < len(lines) else None}


def _write_file_asks(a: dict) -> list[str]:
    found = ['replace everything in {path} with "{content}"', 'overwrite {path} so it just says "{content}"',
             'write "{content}" into {path}', 'save "{content}" as the contents of {path}']
    if a.get("create_if_missing") is False:
        found += ['overwrite {path} with "{content}", but only if that file already exists',
                  'if {path} exists, rewrite it to say "{content}"; don\'t create it otherwise']
    return found


@server.tool(
    idempotent=True,  # writing identical content changes nothing
    destructive=True,  # replaces what the file held
    reads=["file", "directory"],
    produces=["file"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "FILE_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[{"path": "~/notes/todo.md", "content": "# TODO\n\n- [ ] Water the plants\n"},
              {"path": "~/notes/reading-list.md", "content": "# Reading list\n"}],
    asks=_write_file_asks,
    values={"path": lambda rng, s: rng.choice(NEW_FILES)[0], "content": lambda rng, s: rng.choice(NEW_FILES)[1]},
)
def write_file(
    state: FsState,
    path: Annotated[str, Field(description=f"File to write: {_PATH_HELP}. Symlinks are followed.")],
    content: Content,
    create_if_missing: Annotated[bool, Field(description="Create the file when it does not exist (else "
                                                         "PATH_NOT_FOUND).")] = True,
) -> dict:
    """Replace a file's whole content (or create it). Returns the file's details and whether it was
    created. Needs write permission on the file (or its directory, to create). Fails with
    PERMISSION_DENIED (e.g. a read-only file: change_mode first), IS_A_DIRECTORY, FILE_TOO_LARGE
    (over 1 MiB), QUOTA_EXCEEDED, PATH_NOT_FOUND or a path error."""
    loc = _locate(state, path, must_exist=not create_if_missing)
    if loc.node is None:
        return {**_entry(_new_text_file(state, loc, content, 0o644), loc.path), "created": True}
    _require_file(loc)
    _require_access(_user(state), loc.node, "w", loc.path)
    return {**_entry(_set_text(state, loc, content), loc.path), "created": False}


@server.tool(
    reads=["file"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE", "FILE_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[{"path": "~/notes/todo.md", "content": "- [ ] Book the dentist\n"}],
    asks=('add "{content}" to the end of {path}', 'append "{content}" to {path}', 'tack "{content}" onto {path}',
          'put "{content}" at the bottom of {path}'),
    values={"content": lambda rng, s: rng.choice(TODO_LINES)},
)
def append_to_file(state: FsState, path: FilePath, content: Content) -> dict:
    """Add text at the end of an existing text file (no newline is added for you). Returns the
    file's details. Fails with PERMISSION_DENIED (no write permission), IS_A_DIRECTORY,
    BINARY_FILE, FILE_TOO_LARGE (over 1 MiB), QUOTA_EXCEEDED or a path error."""
    loc = _locate(state, path)
    current = _text_of(loc)
    _require_access(_user(state), loc.node, "w", loc.path)
    return _entry(_set_text(state, loc, current + content), loc.path)


def _edit_file_asks(a: dict) -> list[str]:
    found = ['in {path}, change "{old_text}" to "{new_text}"', 'replace "{old_text}" with "{new_text}" in {path}',
             'edit {path} so that "{old_text}" reads "{new_text}" instead']
    if a.get("replace_all"):
        found += ['replace every "{old_text}" with "{new_text}" in {path}',
                  'change all occurrences of "{old_text}" in {path} to "{new_text}"']
    return found


@server.tool(
    destructive=True,
    reads=["file"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE", "TEXT_NOT_FOUND", "AMBIGUOUS_MATCH", "FILE_TOO_LARGE",
            "QUOTA_EXCEEDED"],
    examples=[lambda s: {"path": f"{_project(s)}/README.md", "old_text": "## Usage", "new_text": "## Getting started"}],
    asks=_edit_file_asks,
    values={"new_text": lambda rng, s: rng.choice(HEADINGS)},
)
def edit_file(
    state: FsState,
    path: FilePath,
    old_text: Annotated[str, Field(min_length=1, max_length=MAX_WRITE_CHARS,
                                   description="Exact text to find (whitespace and case matter).")],
    new_text: Annotated[str, Field(max_length=MAX_WRITE_CHARS, description="Text to put in its place.")],
    replace_all: Annotated[bool, Field(description="Replace every occurrence instead of requiring exactly "
                                                   "one.")] = False,
) -> dict:
    """Replace exact text in a text file. Returns how many replacements were made, the new size and a
    unified diff of the change. Fails with TEXT_NOT_FOUND, AMBIGUOUS_MATCH (old_text occurs several
    times: add context or pass replace_all), PERMISSION_DENIED (no write permission),
    IS_A_DIRECTORY, BINARY_FILE, FILE_TOO_LARGE, QUOTA_EXCEEDED or a path error."""
    loc = _locate(state, path)
    content = _text_of(loc)
    _require_access(_user(state), loc.node, "w", loc.path)
    count = content.count(old_text)
    require(count > 0, f"{old_text[:60]!r} does not occur in {loc.path}", reason="TEXT_NOT_FOUND", path=loc.path)
    require(count == 1 or replace_all, f"{old_text[:60]!r} occurs {count} times in {loc.path}; add surrounding "
            "text to make it unique or pass replace_all=true", reason="AMBIGUOUS_MATCH", path=loc.path,
            occurrences=count)
    updated = content.replace(old_text, new_text)
    node = _set_text(state, loc, updated)
    diff = difflib.unified_diff(content.splitlines(), updated.splitlines(), loc.path, loc.path, lineterm="")
    return {"path": loc.path, "replacements": count, "size": node["size"], "diff": "\n".join(diff)}


@server.tool(
    idempotent=True,
    destructive=True,
    reads=["file"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE", "FILE_TOO_LARGE", "QUOTA_EXCEEDED"],
    examples=[{"path": "/tmp/scratch.txt", "size": 0}, {"path": "~/notes/todo.md", "size": 6}],
    asks=("truncate {path} to {size} bytes", "cut {path} down to {size} bytes", "resize {path} to exactly {size} bytes",
          "shrink {path} to {size} bytes"),
    values={"size": lambda rng, s: rng.choice(TRUNCATE_SIZES)},
)
def truncate_file(
    state: FsState,
    path: FilePath,
    size: Annotated[int, Field(ge=0, description="New size in bytes; a larger size pads with NUL bytes.")],
) -> dict:
    """Cut a text file to a size in bytes, or pad it with NUL bytes up to that size (truncate -s).
    A cut never splits a character. Returns the file's details. Fails with PERMISSION_DENIED (no
    write permission), IS_A_DIRECTORY, BINARY_FILE, FILE_TOO_LARGE (over 1 MiB), QUOTA_EXCEEDED or
    a path error."""
    loc = _locate(state, path)
    content = _text_of(loc)
    _require_access(_user(state), loc.node, "w", loc.path)
    raw = content.encode()
    require(size <= MAX_TEXT_FILE_BYTES, f"{loc.path} would be {_human(size)}; text files are limited to "
            f"{_human(MAX_TEXT_FILE_BYTES)}", reason="FILE_TOO_LARGE", error=ResourceExhausted, path=loc.path,
            size=size, limit=MAX_TEXT_FILE_BYTES)  # before padding: a huge size would allocate all of it
    updated = raw[:size].decode(errors="ignore") if size <= len(raw) else content + "\x00" * (size - len(raw))
    return _entry(_set_text(state, loc, updated), loc.path)


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing (PATH_NOT_FOUND)
    reads=["file", "directory"],
    mutates=["file", "symlink", "user"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY"],
    examples=[{"path": "~/notes/ideas.md"}, {"path": "~/old-notes"}],
    asks=("delete {path}", "permanently remove {path}", "get rid of {path} for good, no trash", "rm {path}"),
)
def delete_file(state: FsState, path: AnyPath) -> dict:
    """Delete a file or a symlink for good (rm; a symlink's target is untouched). Use move_to_trash
    to keep a way back and remove_directory for directories. Returns what was deleted and the bytes
    freed. Fails with IS_A_DIRECTORY, PERMISSION_DENIED (no write permission on the directory, or
    someone else's file in a sticky directory such as /tmp) or a path error."""
    loc = _locate(state, path, follow=False)
    node = _require_file(loc)
    _require_unlink(_user(state), loc)
    freed = _delete_nodes(state, [node])
    state.nodes.update(loc.parent["id"], modified_at=_now(state))
    return {"deleted": loc.path, "type": node["kind"], "freed_bytes": freed}


@server.tool(
    reads=["file", "directory"],
    produces=["file"],
    mutates=["file"],
    errors=[*RESOLVE_ERRORS],
    examples=[{"path": "~/notes/todo.md"}, {"path": "~/notes/new-note.md"}],
    asks=("touch {path}", "update the modified time of {path}, creating it if needed", "bump the timestamp on {path}",
          "make sure a file exists at {path}"),
    values={"path": lambda rng, s: rng.choice(NEW_FILES)[0]},
)
def touch_file(state: FsState, path: Annotated[str, Field(description=f"File to touch: {_PATH_HELP}.")]) -> dict:
    """Set a file's modification time to now, creating an empty file if none exists (touch).
    Returns the file's details and whether it was created. Fails with PERMISSION_DENIED (neither
    owner nor writer of the file, or no write permission on the directory to create it) or a path
    error."""
    loc = _locate(state, path, must_exist=False)
    user = _user(state)
    if loc.node is None:
        return {**_entry(_new_text_file(state, loc, "", 0o644), loc.path), "created": True}
    if user["id"] not in (ROOT, loc.node["owner"]):
        _require_access(user, loc.node, "w", loc.path)
    return {**_entry(state.nodes.update(loc.node["id"], modified_at=_now(state)), loc.path), "created": False}


def _file_info_asks(a: dict) -> list[str]:
    found = ["show me the details of {path}", "get the size, owner and permissions of {path}",
             "check who owns {path} and when it was last changed", "stat {path}"]
    if a.get("follow_symlinks") is False:
        found += ["show the details of {path} itself, not what it points to", "stat {path} without following the link"]
    return found


@server.tool(
    answers=("type", "size", "permissions", "owner"),
    read_only=True,
    reads=["file", "directory", "symlink"],
    errors=RESOLVE_ERRORS,
    examples=[{"path": "~/current-project"}, {"path": "~/current-project", "follow_symlinks": False},
              lambda s: {"path": _photo(s)}],
    asks=_file_info_asks,
)
def get_file_info(state: FsState, path: AnyPath, follow_symlinks: FollowLinks = True) -> dict:
    """Everything about one entry (stat): inode id, type, size, octal mode and permission string,
    owner, group, creation and modification times, MIME type, whether it is binary, photo metadata
    (camera, capture time, dimensions, place), a directory's entry count, a symlink's target and
    resolved path, and what the current user may do with it (read, write, execute). Fails with a
    path error (SYMLINK_LOOP when following a looping link)."""
    loc = _locate(state, path, follow=follow_symlinks)
    node = _require_existing(loc)
    user = _user(state)
    info = {**_entry(node, loc.path), "inode": node["id"], "created_at": node["created_at"], "mime": node["mime"],
            "binary": node["binary"], "hidden": node["name"].startswith("."),
            "access": {"read": _allowed(user, node, "r"), "write": _allowed(user, node, "w"),
                       "execute": _allowed(user, node, "x")}}
    if node["meta"]:
        info["photo"] = node["meta"]
    if node["kind"] == "directory":
        info["entries"] = len(state.nodes.where(parent_id=node["id"]))
    if node["kind"] == "symlink":
        info.update(_target_report(state, loc.path))
    return info


def _path_exists_asks(a: dict) -> list[str]:
    found = ["check whether {path} exists", "see if there's anything at {path}", "tell me if {path} is there",
             "find out what kind of thing {path} is, if it exists"]
    if a.get("follow_symlinks") is False:
        found += ["check whether {path} exists, without following symlinks",
                  "see if there's an entry at {path} itself, even a broken link"]
    return found


@server.tool(
    answers=("exists", "type"),
    read_only=True,
    reads=["file", "directory", "symlink"],
    errors=["INVALID_PATH", "PATH_OUTSIDE_ROOT"],
    examples=[{"path": "~/notes/todo.md"}, {"path": "~/notes/nothing-here.md"}, {"path": "~/old-notes"}],
    asks=_path_exists_asks,
)
def path_exists(
    state: FsState,
    path: Annotated[str, Field(description=f"Path to check: {_PATH_HELP}.")],
    follow_symlinks: FollowLinks = True,
) -> dict:
    """Whether a path exists and what it is. Never fails for a missing path: returns exists=false and
    why (PATH_NOT_FOUND, NOT_A_DIRECTORY, PERMISSION_DENIED, SYMLINK_LOOP). Fails only for an unsafe
    or malformed path (INVALID_PATH, PATH_OUTSIDE_ROOT)."""
    try:
        loc = _locate(state, path, follow=follow_symlinks)
    except ToolError as exc:
        if exc.reason in ("INVALID_PATH", "PATH_OUTSIDE_ROOT"):
            raise
        return {"path": path, "exists": False, "type": None, "problem": exc.reason}
    return {"path": loc.path, "exists": True, "type": _require_existing(loc)["kind"], "problem": None}
