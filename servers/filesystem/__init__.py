"""filesystem — a virtual POSIX-like file tree per session, seen by one signed-in user.

The tree lives entirely in the session state: nothing here opens, stats or lists a real file.
Directories, text files, binary files (photos, PDFs: metadata and a digest, no bytes) and
symlinks are ``node`` records; permissions follow the POSIX owner/group/other bits against the
current user (root bypasses them), with the sticky bit on ``/tmp``; every user but root has a
byte quota, charged for the files they own (trashed ones too, until the trash is emptied) and
the archives they keep.

Path safety is the first rule: every path a tool receives is checked (no NUL or control
characters, no backslashes, bounded length) and normalized against the session's root before
anything is looked up. ``..`` above ``/``, drive letters, UNC and URL-style paths, and symlinks
whose target would leave the root are typed errors (PATH_OUTSIDE_ROOT, INVALID_PATH); symlink
resolution is bounded, so a loop is SYMLINK_LOOP rather than a hang.

State layout, chosen so that forks stay cheap and no call scans the whole tree: nodes are keyed
by inode id and name their directory (``parent_id``) and their directory entry
(``dirent`` = "<parent id>/<name>"); both fields are indexed, so resolving a path costs one
index lookup per component and listing a directory one lookup. A move or rename rewrites one
record whatever the size of the subtree; moving to the trash detaches the subtree's top node.

Layout, in import order (each module imports only those above it):

- ``model``: limits, the state tables and seed options, path errors;
- ``nodes``: the node record and how tools show it; ``access``: users, permissions, quota;
- ``paths``: validation, normalization and resolution; ``ops``: writes the tools share;
- ``seed`` and ``app`` (the ``Server``, its seed function, shared parameter types);
- ``examples``; then the tools, registered in catalog order: ``directories``, ``files``,
  ``moves``, ``permissions``, ``search``, ``archives``, ``trash``.
"""

from __future__ import annotations

from typing import Any

from prove_core import hookimpl
from prove_servers.filesystem.app import build_filesystem, server
from prove_servers.filesystem.model import (
    DIR_SIZE,
    MAX_ARCHIVE_ENTRIES,
    MAX_DIFF_BYTES,
    MAX_SYMLINK_HOPS,
    MAX_TEXT_FILE_BYTES,
    MAX_WRITE_CHARS,
    MIB,
    MIME_TYPES,
    NAME_MAX,
    PATH_MAX,
    RESOLVE_ERRORS,
    ROOT,
    FsOptions,
    FsState,
    NodeType,
)
from prove_servers.filesystem.paths import Loc
from prove_servers.filesystem.paths import _path_of as _path_of  # tests check paths with it

# Importing a tool module registers its tools on ``server``, so this order is the order clients
# list the tools in (and the catalog's): keep it, and keep the import sorter out.
# isort: off
from prove_servers.filesystem.directories import (
    change_directory,
    get_current_user,
    get_disk_usage,
    get_tree,
    list_directory,
    list_users,
    make_directory,
    remove_directory,
)
from prove_servers.filesystem.files import (
    append_to_file,
    create_file,
    delete_file,
    edit_file,
    get_file_info,
    path_exists,
    read_file,
    touch_file,
    truncate_file,
    write_file,
)
from prove_servers.filesystem.moves import copy_path, move_path
from prove_servers.filesystem.permissions import change_mode, change_owner, create_symlink, read_symlink
from prove_servers.filesystem.search import (
    count_words,
    diff_files,
    find_files,
    grep_file,
    hash_file,
    head_file,
    search_file_contents,
    tail_file,
)
from prove_servers.filesystem.archives import create_archive, extract_archive, list_archive_entries, list_archives
from prove_servers.filesystem.trash import empty_trash, list_trash, move_to_trash, restore_from_trash
# isort: on

__all__ = [
    "DIR_SIZE",
    "FsOptions",
    "FsState",
    "Loc",
    "MAX_ARCHIVE_ENTRIES",
    "MAX_DIFF_BYTES",
    "MAX_SYMLINK_HOPS",
    "MAX_TEXT_FILE_BYTES",
    "MAX_WRITE_CHARS",
    "MIB",
    "MIME_TYPES",
    "NAME_MAX",
    "NodeType",
    "PATH_MAX",
    "RESOLVE_ERRORS",
    "ROOT",
    "append_to_file",
    "build_filesystem",
    "change_directory",
    "change_mode",
    "change_owner",
    "copy_path",
    "count_words",
    "create_archive",
    "create_file",
    "create_symlink",
    "delete_file",
    "diff_files",
    "edit_file",
    "empty_trash",
    "extract_archive",
    "find_files",
    "get_current_user",
    "get_disk_usage",
    "get_file_info",
    "get_tree",
    "grep_file",
    "hash_file",
    "head_file",
    "list_archive_entries",
    "list_archives",
    "list_directory",
    "list_trash",
    "list_users",
    "make_directory",
    "move_path",
    "move_to_trash",
    "path_exists",
    "read_file",
    "read_symlink",
    "remove_directory",
    "restore_from_trash",
    "search_file_contents",
    "server",
    "tail_file",
    "touch_file",
    "truncate_file",
    "write_file",
]


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
