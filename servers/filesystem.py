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
"""

from __future__ import annotations

import datetime as dt
import difflib
import fnmatch
import hashlib
import math
import random
import re
from typing import Annotated, Any, Literal, NamedTuple

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Server,
    State,
    Table,
    ToolError,
    fake,
    paginate,
    ref,
    require,
)

Record = dict[str, Any]
NodeType = Literal["file", "directory", "symlink"]

# -- limits and vocabulary ------------------------------------------------------------------------

PATH_MAX = 1024  # characters in a path or symlink target
NAME_MAX = 255  # bytes in one path component
MAX_SYMLINK_HOPS = 16  # links followed while resolving one path; more means a loop
MAX_TEXT_FILE_BYTES = 1_048_576  # a text file may grow to 1 MiB
MAX_WRITE_CHARS = 100_000  # characters of content in one call
MAX_DIFF_BYTES = 262_144  # each side of a diff
MAX_ARCHIVE_ENTRIES = 2_000
MIB = 1_048_576
ROOT = "root"
DIR_SIZE = 0  # directories weigh nothing; disk usage sums file sizes

MIME_TYPES = {
    ".md": "text/markdown", ".txt": "text/plain", ".py": "text/x-python", ".js": "text/javascript",
    ".json": "application/json", ".toml": "application/toml", ".csv": "text/csv", ".sh": "text/x-shellscript",
    ".log": "text/plain", ".jpg": "image/jpeg", ".png": "image/png", ".pdf": "application/pdf",
    ".zip": "application/zip", ".pub": "text/plain", ".cfg": "text/plain",
}

# (name, language, noun, description) of the projects a home directory can hold.
PROJECTS = (
    ("weather-cli", "python", "forecast", "Fetch forecasts and print a compact weekly summary."),
    ("invoice-parser", "python", "invoice", "Extract totals and due dates from exported invoices."),
    ("trail-planner", "javascript", "trail", "Plan day hikes from elevation profiles and daylight hours."),
    ("recipe-box", "javascript", "recipe", "A small recipe manager with tag search."),
    ("budget-tracker", "python", "expense", "Track monthly spending against category budgets."),
    ("habit-log", "javascript", "habit", "Log daily habits and show streaks."),
    ("photo-sorter", "python", "photo", "Sort photos into albums by capture date."),
    ("chess-clock", "javascript", "move", "A chess clock with increments for the terminal."),
)
TODOS = (
    "handle empty input files", "add retries for flaky network calls", "cache results between runs",
    "support CSV export", "validate dates before parsing", "document the config file", "add a --verbose flag",
)
STATUSES = ("tests green, ready for review", "blocked on an API key", "refactoring the parser", "shipped 0.3 to PyPI",
            "pairing on the CLI flags", "fixing a timezone bug")
PERSONAL_TODOS = ("Renew passport", "Call the dentist", "Book train tickets for April", "Back up the laptop",
                  "Return library books", "Pay the electricity bill")
IDEAS = ("A plant-watering reminder that reads the weather", "Turn the recipe box into a meal planner",
         "Offline map tiles for the trail planner", "A tiny static blog generator", "Sync notes to an e-reader")
ALBUMS = ("lisbon-trip", "autumn-hike", "family-dinner", "city-walks", "beach-weekend", "birthday-party")
CAMERAS = ("Pixel 8", "iPhone 15", "Fujifilm X-T30", "Sony A6400")
BUDGET_CATEGORIES = (("rent", 1400, 1400), ("groceries", 280, 520), ("transport", 60, 140), ("utilities", 90, 180),
                     ("eating out", 80, 260), ("books", 10, 60))
DICTIONARY = ("apple", "bridge", "candle", "delta", "ember", "forest", "garden", "harbor", "island", "jigsaw",
              "kernel", "lantern", "meadow", "nectar", "orbit", "pebble", "quartz", "river", "saddle", "timber")

# What users name when they ask for a tool (``asks``/``values``): new paths whose directory exists
# in every seed, short texts, modes, names, and the words and globs people search for.
NEW_DIRECTORIES = ("~/projects/side-project", "~/Documents/taxes-2026", "~/Pictures/scans", "~/notes/journal",
                   "~/Documents/receipts", "~/Downloads/installers", "/tmp/build-output",
                   "~/Documents/letters/insurance", "~/projects/sandbox", "~/notes/recipes")
NEW_FILES = (  # (path, text): value sources of one call share a seed, so a file's name and text agree
    ("~/notes/groceries.md", "Buy oat milk, coffee beans and bananas"),
    ("~/notes/plumber.txt", "Call the plumber on Monday about the kitchen tap"),
    ("~/notes/appointments.md", "Dentist appointment on Thursday at 3pm"),
    ("~/Documents/offsite-ideas.md", "Offsite ideas: bowling, a cooking class, a hike"),
    ("~/notes/car.md", "Renew the car insurance before the 15th"),
    ("~/Documents/thank-you-note.txt", "Draft: thanks for the interview yesterday"),
    ("~/notes/packing-list.md", "Passport, charger, rain jacket, hiking boots"),
    ("/tmp/standup-note.txt", "Standup moved to Wednesday 10:00"),
    ("~/notes/errands.md", "Pick up the dry cleaning on Friday"),
    ("~/notes/reading-list.md", "Books: Dune, The Overstory, Piranesi"),
)
TODO_LINES = ("- [ ] Book the dentist", "- [ ] Renew the car insurance", "- [ ] Email the landlord about the tap",
              "- [ ] Back up the photos", "- [ ] Return the library books", "- [ ] Water the plants",
              "- [ ] Pay the electricity bill", "- [ ] Order a birthday present for Mum")
HEADINGS = ("## Getting started", "## How to use it", "## Quick start", "## Running it", "## Examples",
            "## Basic usage", "## First steps")
FILE_MODES = ("600", "640", "644", "664", "0600", "0640", "0644")
DIRECTORY_MODES = ("700", "750", "755", "775", "0700", "0750", "0755")
TRUNCATE_SIZES = (0, 16, 32, 64, 100, 128, 256)
DESTINATIONS = ("~/Documents", "~/Downloads", "/tmp", "~/notes/archive", "~/Documents/letters", "/srv/team")
SYMLINKS = (("~/todo-link", "notes/todo.md"), ("~/team", "/srv/team"), ("~/budget", "Documents/budget-2026.csv"),
            ("~/logs", "/var/log"), ("~/words", "/usr/share/dict/words"), ("~/roadmap", "/srv/team/roadmap.md"),
            ("~/docs", "Documents"), ("~/photos", "Pictures"))  # (link, target)
RESTORE_PATHS = ("~/notes/recovered.txt", "~/Documents/restored.txt", "~/Downloads/recovered-file.txt",
                 "/tmp/restored.txt", "~/notes/from-trash.md", "~/Documents/draft-restored.txt")
ARCHIVES = (("notes-backup", ("~/notes",)), ("documents-2026", ("~/Documents",)),
            ("todo-and-ideas", ("~/notes/todo.md", "~/notes/ideas.md")), ("meeting-notes", ("~/notes/meetings",)),
            ("dotfiles-backup", ("~/.bashrc", "~/.profile", "~/.gitconfig")),
            ("resume-and-letters", ("~/Documents/resume.md", "~/Documents/letters")),
            ("budget-2026", ("~/Documents/budget-2026.csv",)))  # (name, what it packs)
SEARCH_TEXTS = ("TODO", "deploy", "backup", "import", "roadmap", "rent", "version", "localhost", "Thursday")
LINE_PATTERNS = ("TODO", "return", "import", "def", "total", "json", "if not", "items")
NAME_GLOBS = ("*.py", "*.md", "*.jpg", "*.txt", "*.csv", "*.sh", "*.json", "README*", "*.log", "test_*")

# -- state and options ----------------------------------------------------------------------------


class FsState(State):
    """One machine's tree. Vars: ``user`` (who is signed in), ``root_id`` and ``cwd_id`` (the
    working directory, by inode, so moving it keeps it)."""

    users = Table("user", prefix="usr")  # keyed by user name; carries quota and usage
    groups = Table("group", prefix="grp")  # keyed by group name
    nodes = Table("node", prefix="ino", index=("parent_id", "dirent"))
    archives = Table("archive", prefix="arc", index=("owner",))
    trash = Table("trash_item", prefix="trs", index=("owner",))


@attrs.frozen(kw_only=True)
class FsOptions:
    """Seed size: how many projects the user's home holds; meeting notes and photo albums grow with it."""

    projects: int = attrs.field(default=4, validator=attrs.validators.gt(0))


# -- errors ---------------------------------------------------------------------------------------


def _invalid(message: str, **details: Any) -> InvalidArgument:
    return InvalidArgument(message, reason="INVALID_PATH", **details)


def _outside(message: str, **details: Any) -> PermissionDenied:
    return PermissionDenied(message, reason="PATH_OUTSIDE_ROOT", **details)


# Every tool that takes a path can fail while resolving it.
RESOLVE_ERRORS = ["INVALID_PATH", "PATH_OUTSIDE_ROOT", "PATH_NOT_FOUND", "NOT_A_DIRECTORY", "PERMISSION_DENIED",
                  "SYMLINK_LOOP"]

# -- paths: validation, normalization and resolution ----------------------------------------------

_FOREIGN_ROOT = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://|[A-Za-z]:([\\/]|$)|\\\\)")


def _check_text(raw: str, what: str) -> None:
    """Shape rules shared by paths and symlink targets."""
    if not raw:
        raise _invalid(f"the {what} is empty")
    if "\x00" in raw:
        raise _invalid(f"the {what} contains a NUL byte")
    if len(raw) > PATH_MAX:
        raise _invalid(f"the {what} is {len(raw)} characters long; the limit is {PATH_MAX}", limit=PATH_MAX)
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise _invalid(f"the {what} contains control characters")
    if _FOREIGN_ROOT.match(raw):
        raise _outside(f"{raw!r} names a location outside this machine's tree (drive, share or URL); "
                       "use a path under /", path=raw)
    if "\\" in raw:
        raise _invalid(f"the {what} contains a backslash; separate components with /")


def _parts(path: str, shown: str) -> list[str]:
    """Lexically normalized components of an absolute path; ``..`` may not climb above ``/``."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                raise _outside(f"{shown!r} climbs above the root directory", path=shown)
            out.pop()
            continue
        if len(part.encode()) > NAME_MAX:
            raise _invalid(f"the name {part[:40]!r}... is longer than {NAME_MAX} bytes", limit=NAME_MAX)
        out.append(part)
    return out


def _join(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def _absolute_parts(state: FsState, raw: str) -> list[str]:
    """A tool's path argument as normalized components: ``~`` and ``~user`` name home
    directories, other relative paths start at the working directory."""
    _check_text(raw, "path")
    if raw.startswith("~"):
        name, _, rest = raw[1:].partition("/")
        user = state.users.find(name or state.get_var("user"))
        if user is None:
            raise _invalid(f"{raw!r}: there is no user named {name!r}")
        raw_abs = f"{user['home']}/{rest}"
    elif raw.startswith("/"):
        raw_abs = raw
    else:
        raw_abs = f"{_path_of(state, state.nodes.get(state.get_var('cwd_id')))}/{raw}"
    return _parts(raw_abs, raw)


def _link_parts(link_dir: list[str], target: str) -> list[str]:
    """Where a symlink's target points: relative targets start at the link's directory."""
    base = target if target.startswith("/") else _join(link_dir) + "/" + target
    return _parts(base, target)


class Loc(NamedTuple):
    """A resolved path: the entry (None when it does not exist yet), its directory and name."""

    path: str
    node: Record | None
    parent: Record
    name: str


def _locate(state: FsState, raw: str, *, follow: bool = True, must_exist: bool = True) -> Loc:
    """Resolve a path safely. Symlinks in directories are always followed, a final one only
    with ``follow``; every directory walked through needs search (x) permission."""
    parts = _absolute_parts(state, raw)
    for _ in range(MAX_SYMLINK_HOPS + 1):
        loc, link_at = _descend(state, parts, follow=follow, must_exist=must_exist)
        if loc is not None:
            return loc
        link = state.nodes.first(dirent=link_at[1])
        parts = _link_parts(parts[: link_at[0]], link["target"]) + parts[link_at[0] + 1 :]
    raise FailedPrecondition(f"too many levels of symbolic links resolving {raw!r} (a loop?)", reason="SYMLINK_LOOP",
                             path=raw, limit=MAX_SYMLINK_HOPS)


def _descend(state: FsState, parts: list[str], *, follow: bool, must_exist: bool) -> tuple[Loc | None, Any]:
    """One walk from the root: a ``Loc``, or (None, (index, dirent)) at a symlink to follow."""
    user = _user(state)
    parent = node = state.nodes.get(state.get_var("root_id"))
    for i, name in enumerate(parts):
        _require_access(user, node, "x", _join(parts[:i]))
        dirent = f"{node['id']}/{name}"
        child = state.nodes.first(dirent=dirent)
        last = i == len(parts) - 1
        if child is None:
            if last and not must_exist:
                return Loc(_join(parts), None, node, name), None
            missing = _join(parts[: i + 1])
            raise NotFound(f"{missing} does not exist", reason="PATH_NOT_FOUND", path=missing)
        if child["kind"] == "symlink" and (follow or not last):
            return None, (i, dirent)
        if not last and child["kind"] != "directory":
            raise FailedPrecondition(f"{_join(parts[: i + 1])} is a file, not a directory", reason="NOT_A_DIRECTORY",
                                     path=_join(parts[: i + 1]))
        parent, node = node, child
    return Loc(_join(parts), node, parent, parts[-1] if parts else ""), None


def _child_loc(state: FsState, directory: Loc, name: str) -> Loc:
    """The entry ``name`` inside a resolved directory (not followed if it is a symlink)."""
    _require_access(_user(state), directory.node, "x", directory.path)
    child = state.nodes.first(dirent=f"{directory.node['id']}/{name}")
    return Loc(_child_path(directory.path, name), child, directory.node, name)


def _child_path(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def _under(path: str, rel: list[str]) -> str:
    """The path of an entry ``rel`` components below ``path``."""
    return "/".join([path.rstrip("/"), *rel]) if rel else path


def _path_of(state: FsState, node: Record) -> str:
    names = []
    while node["parent_id"] is not None:
        names.append(node["name"])
        node = state.nodes.get(node["parent_id"])
    return _join(names[::-1])


def _try_resolve(state: FsState, raw: str) -> tuple[str | None, str | None]:
    """(resolved path, None) or (None, the reason resolution fails): for reports, never raises."""
    try:
        return _locate(state, raw).path, None
    except ToolError as exc:
        return None, exc.reason


def _require_existing(loc: Loc) -> Record:
    assert loc.node is not None
    return loc.node


def _require_directory(loc: Loc) -> Record:
    node = _require_existing(loc)
    require(node["kind"] == "directory", f"{loc.path} is a {node['kind']}, not a directory", reason="NOT_A_DIRECTORY",
            path=loc.path)
    return node


def _require_file(loc: Loc) -> Record:
    node = _require_existing(loc)
    require(node["kind"] != "directory", f"{loc.path} is a directory", reason="IS_A_DIRECTORY", path=loc.path)
    return node


def _text_of(loc: Loc) -> str:
    node = _require_file(loc)
    require(not node["binary"], f"{loc.path} is a binary {node['mime']} file; it has no text to read. "
            "get_file_info shows its metadata", reason="BINARY_FILE", path=loc.path, mime=node["mime"])
    return node["content"] or ""


# -- users, permissions and quota -----------------------------------------------------------------


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


def _require_unlink(user: Record, loc: Loc) -> None:
    """Removing or renaming an entry needs write and search on its directory; in a sticky
    directory (/tmp) only the entry's owner, the directory's owner or root may do it."""
    directory = _path_of_parent(loc)
    _require_access(user, loc.parent, "w", directory)
    _require_access(user, loc.parent, "x", directory)
    node = _require_existing(loc)
    if loc.parent["mode"] & 0o1000 and user["id"] not in (ROOT, node["owner"], loc.parent["owner"]):
        raise PermissionDenied(f"{directory} is sticky: only {node['owner']} may remove or rename {loc.path}",
                               reason="PERMISSION_DENIED", path=loc.path, needs="owner")


def _require_create(user: Record, loc: Loc) -> None:
    directory = _path_of_parent(loc)
    _require_access(user, loc.parent, "w", directory)
    _require_access(user, loc.parent, "x", directory)


def _path_of_parent(loc: Loc) -> str:
    return loc.path.rsplit("/", 1)[0] or "/"


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


# -- nodes: views, creation, subtrees --------------------------------------------------------------


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


def _create(state: FsState, loc: Loc, kind: str, mode: int, **fields: Any) -> Record:
    """A new entry owned by the current user, stamped now; its directory's mtime moves too."""
    user = _user(state)
    now = _now(state)
    node = _insert_node(state, loc.parent, loc.name, kind, owner=user["id"], group=user["groups"][0], mode=mode,
                        when=now, **fields)
    state.nodes.update(loc.parent["id"], modified_at=now)
    return node


def _now(state: FsState) -> str:
    return state.now().strftime("%Y-%m-%dT%H:%M:%SZ")


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


def _lines(content: str) -> list[str]:
    return content.splitlines()


def _target_report(state: FsState, path: str) -> dict[str, Any]:
    resolved, problem = _try_resolve(state, path)
    return {"resolves_to": resolved, "problem": problem, "dangling": problem == "PATH_NOT_FOUND"}


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


# -- seed -------------------------------------------------------------------------------------------


def build_filesystem(rng: random.Random, options: FsOptions) -> FsState:
    """A laptop's tree: system directories (read-only for users), three users' homes, the signed-in
    user's projects, notes, documents and photos, a shared team directory, /tmp, an archive and
    a trashed file per person."""
    state = FsState(salt=str(rng.random()))
    seeder = _Seeder(state, rng)
    me, colleague, guest = seeder.users()
    seeder.system(me, colleague)
    seeder.home(me, colleague, options.projects)
    seeder.colleague_home(colleague)
    seeder.guest_home(guest)
    seeder.shared(me, colleague)
    seeder.finish(me, colleague)
    return state


class _Seeder:
    """Builds the seed tree with the same node shape the tools write."""

    def __init__(self, state: FsState, rng: random.Random) -> None:
        self.state, self.rng = state, rng
        self.today = state.today()

    def ago(self, low: int, high: int) -> str:
        when = self.state.now() - dt.timedelta(days=self.rng.randint(low, high), minutes=self.rng.randint(0, 1439))
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    def dir(self, parent: Record, name: str, owner: str, mode: int = 0o755, group: str | None = None) -> Record:
        return _insert_node(self.state, parent, name, "directory", owner=owner, group=group or owner, mode=mode,
                            when=self.ago(200, 900))

    def file(self, parent: Record, name: str, content: str, owner: str, mode: int = 0o644,
             group: str | None = None, age: tuple[int, int] = (1, 400)) -> Record:
        return _insert_node(self.state, parent, name, "file", owner=owner, group=group or owner, mode=mode,
                            when=self.ago(*age), **_text_fields(name, content))

    def blob(self, parent: Record, name: str, size: int, owner: str, meta: Record | None = None) -> Record:
        return _insert_node(self.state, parent, name, "file", owner=owner, group=owner, mode=0o644,
                            when=self.ago(1, 300), size=size, binary=True, sha256=f"{self.rng.getrandbits(256):064x}",
                            meta=meta)

    def link(self, parent: Record, name: str, target: str, owner: str) -> Record:
        return _insert_node(self.state, parent, name, "symlink", owner=owner, group=owner, mode=0o777,
                            when=self.ago(5, 60), target=target, size=len(target.encode()))

    # -- people ------------------------------------------------------------------------------
    def users(self) -> tuple[Record, Record, Record]:
        state, rng = self.state, self.rng
        first_names = rng.sample(fake.FIRST_NAMES, 3)
        people = []
        state.users.insert({"id": ROOT, "uid": 0, "full_name": "System Administrator", "home": "/root",
                            "shell": "/bin/bash", "groups": [ROOT, "adm"], "quota_bytes": None, "used_bytes": 0})
        for uid, first in enumerate(first_names, start=1000):
            name = first.lower()
            people.append(state.users.insert({
                "id": name, "uid": uid, "full_name": f"{first} {rng.choice(fake.LAST_NAMES)}", "home": f"/home/{name}",
                "shell": "/bin/zsh" if uid == 1000 else "/bin/bash",
                "groups": [name, "staff", "users"] if uid < 1002 else [name, "users"],
                "quota_bytes": None, "used_bytes": 0,
            }))
        me, colleague, guest = people
        for gid, group, members in ((0, ROOT, [ROOT]), (4, "adm", [ROOT]), (50, "staff", [me["id"], colleague["id"]]),
                                    (100, "users", [p["id"] for p in people]),
                                    *((p["uid"], p["id"], [p["id"]]) for p in people)):
            state.groups.insert({"id": group, "gid": gid, "members": members})
        state.set_var("user", me["id"])
        return me, colleague, guest

    def system(self, me: Record, colleague: Record) -> None:
        state = self.state
        root = _insert_node(state, None, "", "directory", owner=ROOT, group=ROOT, mode=0o755, when=self.ago(900, 900))
        state.set_var("root_id", root["id"])
        self.root = root
        etc = self.dir(root, "etc", ROOT)
        users = state.users.all()
        self.file(etc, "hostname", f"{me['id']}-laptop\n", ROOT)
        self.file(etc, "hosts", f"127.0.0.1\tlocalhost\n127.0.1.1\t{me['id']}-laptop\n::1\tlocalhost\n", ROOT)
        self.file(etc, "passwd", "".join(
            f"{u['id']}:x:{u['uid']}:{u['uid']}:{u['full_name']}:{u['home']}:{u['shell']}\n" for u in users), ROOT)
        self.file(etc, "group", "".join(
            f"{g['id']}:x:{g['gid']}:{','.join(g['members'])}\n" for g in state.groups.all()), ROOT)
        self.file(etc, "shadow", "".join(f"{u['id']}:$6$rounds=5000$placeholder:19700:0:99999:7:::\n" for u in users),
                  ROOT, mode=0o600)
        self.file(etc, "motd", "Welcome! Backups run nightly at 02:00. Report problems to it-help@example.com.\n", ROOT)
        self.file(etc, "os-release", 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n',
                  ROOT)
        self.file(etc, "timezone", "America/Chicago\n", ROOT)
        self.dir(root, "home", ROOT)
        root_home = self.dir(root, ROOT, ROOT, mode=0o700)
        self.file(root_home, ".bashrc", "export PATH=/usr/local/sbin:$PATH\n", ROOT)
        usr = self.dir(root, "usr", ROOT)
        share = self.dir(usr, "share", ROOT)
        words = self.dir(share, "dict", ROOT)
        self.file(words, "words", "\n".join(DICTIONARY) + "\n", ROOT)
        doc = self.dir(self.dir(share, "doc", ROOT), "bash", ROOT)
        self.file(doc, "README", "Bash is the GNU Project's shell.\nSee the manual page bash(1) for details.\n", ROOT)
        local_bin = self.dir(self.dir(usr, "local", ROOT), "bin", ROOT)
        self.file(local_bin, "backup.sh", "#!/bin/sh\n# nightly backup of /home to the NAS\nrsync -a /home/ nas:/backups/\n",
                  ROOT, mode=0o755)
        log = self.dir(self.dir(root, "var", ROOT), "log", ROOT)
        self.file(log, "syslog", "Mar  2 08:59:01 laptop CRON[812]: (root) CMD (run-parts /etc/cron.hourly)\n", ROOT,
                  mode=0o640, group="adm")
        self.file(log, "auth.log", f"Mar  2 08:58:12 laptop sshd[701]: Accepted publickey for {me['id']}\n", ROOT,
                  mode=0o600)
        apt = self.dir(log, "apt", ROOT)
        self.file(apt, "history.log", "Start-Date: 2026-02-27  10:12:44\nInstall: ripgrep:amd64 (13.0.0-4)\n", ROOT)
        tmp = self.dir(root, "tmp", ROOT, mode=0o1777)
        self.file(tmp, f"build-{self.rng.randint(1000, 9999)}.log", "compiling... done in 4.2s\n", colleague["id"],
                  age=(0, 2))
        self.file(tmp, "scratch.txt", "paste buffer\n", me["id"], age=(0, 2))
        self.dir(root, "srv", ROOT)

    def home(self, me: Record, colleague: Record, projects: int) -> None:
        state, rng, user = self.state, self.rng, me["id"]
        home = self.dir(self.child("/home"), user, user, mode=0o755)
        state.set_var("cwd_id", home["id"])
        self.file(home, ".bashrc", "export EDITOR=vim\nalias ll='ls -la'\nalias gs='git status'\n", user)
        self.file(home, ".profile", 'export PATH="$HOME/.local/bin:$PATH"\n', user)
        self.file(home, ".gitconfig", f"[user]\n\tname = {me['full_name']}\n\temail = "
                  f"{fake.email_for(me['full_name'], rng)}\n[init]\n\tdefaultBranch = main\n", user)
        ssh = self.dir(home, ".ssh", user, mode=0o700)
        key = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(68))
        self.file(ssh, "id_ed25519", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key}\n-----END OPENSSH PRIVATE KEY-----\n",
                  user, mode=0o600)
        self.file(ssh, "id_ed25519.pub", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5{key[:40]} {user}@laptop\n", user)
        self.file(ssh, "config", "Host nas\n  HostName 192.168.1.20\n  User backup\n", user, mode=0o600)

        project_dir = self.dir(home, "projects", user)
        specs = rng.sample(PROJECTS, k=min(projects, len(PROJECTS)))
        specs += [(f"{name}-{n // len(PROJECTS) + 2}", *rest) for n, (name, *rest) in
                  enumerate(PROJECTS[i % len(PROJECTS)] for i in range(projects - len(specs)))]
        names = []
        for name, language, noun, description in specs:
            (self.python_project if language == "python" else self.js_project)(project_dir, name, noun, description,
                                                                                user)
            names.append(name)
        self.link(home, "current-project", f"projects/{names[0]}", user)
        self.link(home, "old-notes", "notes/legacy", user)  # dangling: notes/legacy was deleted long ago
        self.notes(home, me, colleague, names, meetings=2 + projects)
        self.documents(home, me)
        self.pictures(home, user, albums=1 + (projects + 1) // 2)

    def python_project(self, parent: Record, name: str, noun: str, description: str, user: str) -> None:
        rng = self.rng
        project = self.dir(parent, name, user)
        package = name.replace("-", "_")
        version = f"0.{rng.randint(1, 9)}.{rng.randint(0, 12)}"
        self.file(project, "README.md", _readme(name, description, f"pip install -e .\n    {name} --help", rng), user)
        self.file(project, ".gitignore", "__pycache__/\n*.pyc\n.venv/\ndist/\n", user)
        self.file(project, "pyproject.toml", f'[project]\nname = "{name}"\nversion = "{version}"\n'
                  f'description = "{description}"\nrequires-python = ">=3.11"\ndependencies = ["httpx>=0.27"]\n\n'
                  f'[project.scripts]\n{name} = "{package}.cli:main"\n', user)
        src = self.dir(self.dir(project, "src", user), package, user)
        self.file(src, "__init__.py", f'"""{description}"""\n\n__version__ = "{version}"\n', user)
        self.file(src, "core.py", _python_core(noun, description, rng), user)
        self.file(src, "cli.py", _python_cli(package, noun), user)
        tests = self.dir(project, "tests", user)
        self.file(tests, "test_core.py", _python_test(package, noun), user)

    def js_project(self, parent: Record, name: str, noun: str, description: str, user: str) -> None:
        rng = self.rng
        project = self.dir(parent, name, user)
        version = f"1.{rng.randint(0, 6)}.{rng.randint(0, 9)}"
        self.file(project, "README.md", _readme(name, description, f"npm install\n    npm start -- --{noun} demo", rng),
                  user)
        self.file(project, ".gitignore", "node_modules/\ndist/\ncoverage/\n", user)
        self.file(project, "package.json", f'{{\n  "name": "{name}",\n  "version": "{version}",\n  "description": '
                  f'"{description}",\n  "main": "src/index.js",\n  "scripts": {{\n    "start": "node src/index.js",\n'
                  f'    "test": "node --test"\n  }},\n  "license": "MIT"\n}}\n', user)
        src = self.dir(project, "src", user)
        self.file(src, "index.js", _js_index(noun, rng), user)
        self.file(src, "utils.js", _js_utils(noun), user)
        test = self.dir(project, "test", user)
        self.file(test, "utils.test.js", _js_test(noun), user)

    def notes(self, home: Record, me: Record, colleague: Record, projects: list[str], meetings: int) -> None:
        rng, user = self.rng, me["id"]
        notes = self.dir(home, "notes", user)
        todo = ["# TODO", ""] + [f"- [ ] {t}" for t in rng.sample(PERSONAL_TODOS, 3)]
        todo += [f"- [ ] {p}: {rng.choice(TODOS)}" for p in projects[:2]] + ["- [x] Back up photos", ""]
        self.file(notes, "todo.md", "\n".join(todo), user, age=(0, 3))
        self.file(notes, "ideas.md", "# Ideas\n\n" + "".join(f"- {i}\n" for i in rng.sample(IDEAS, 3)), user)
        self.file(notes, ".index", "todo.md\nideas.md\nmeetings/\n", user)
        meeting_dir = self.dir(notes, "meetings", user)
        for n in range(meetings):
            day = self.today - dt.timedelta(days=3 + 7 * n)
            people = [me["full_name"], colleague["full_name"], fake.full_name(rng)]
            body = [f"# Standup — {day.isoformat()}", "", f"Attendees: {', '.join(people)}", "", "## Updates"]
            body += [f"- {p}: {rng.choice(STATUSES)}" for p in rng.sample(projects, min(2, len(projects)))]
            body += ["", "## Action items", f"- [ ] TODO({user}): {rng.choice(TODOS)}",
                     f"- [x] {colleague['id']}: review the release notes", ""]
            self.file(meeting_dir, f"{day.isoformat()}-standup.md", "\n".join(body), user, age=(3 + 7 * n, 3 + 7 * n))
        archive = self.dir(notes, "archive", user)
        self.file(archive, "2024-taxes.md", "# Taxes 2024 (filed)\n\nRefund received in May. Keep until 2031.\n"
                  "Do not edit: this is the copy sent to the accountant.\n", user, mode=0o444, age=(300, 400))

    def documents(self, home: Record, me: Record) -> None:
        rng, user = self.rng, me["id"]
        docs = self.dir(home, "Documents", user)
        rows = ["month,category,amount"]
        for month in ("2026-01", "2026-02"):
            rows += [f"{month},{c},{rng.randint(low, high)}.{rng.randint(0, 99):02d}" for c, low, high in
                     BUDGET_CATEGORIES]
        self.file(docs, "budget-2026.csv", "\n".join(rows) + "\n", user, age=(1, 10))
        self.file(docs, "resume.md", f"# {me['full_name']}\n\n## Experience\n\n- Software engineer, "
                  f"{rng.choice(('Cobalt Software', 'Northwind Logistics', 'Atlas Manufacturing'))} (2021-now)\n"
                  "- Junior developer, Riverbend Schools (2018-2021)\n\n## Skills\n\nPython, JavaScript, SQL\n", user)
        letters = self.dir(docs, "letters", user)
        address = fake.address(rng)
        self.file(letters, "landlord-2026-01.txt", f"{address['line1']}\n{address['city']}, {address['region']} "
                  f"{address['postal_code']}\n\nDear landlord,\n\nThe kitchen tap is still dripping. Could someone "
                  f"come by next week?\n\nBest,\n{me['full_name']}\n", user)
        draft = self.file(docs, "old-draft.txt", "First draft of the cover letter. Superseded.\n", user)
        self.trash_node(draft, f"{me['home']}/Documents/old-draft.txt", user)
        downloads = self.dir(home, "Downloads", user)
        self.blob(downloads, "lease-2026.pdf", rng.randint(300_000, 900_000), user)
        self.file(downloads, "wifi-setup.txt", "SSID: home-5G\nRouter admin page: http://192.168.1.1\n", user)

    def pictures(self, home: Record, user: str, albums: int) -> None:
        rng = self.rng
        pictures = self.dir(home, "Pictures", user)
        number = rng.randint(1000, 4000)
        for n in range(albums):
            day = self.today - dt.timedelta(days=20 + 45 * n + rng.randint(0, 10))
            album = self.dir(pictures, f"{day:%Y-%m}-{ALBUMS[n % len(ALBUMS)]}", user)
            camera = rng.choice(CAMERAS)
            city = rng.choice(fake.CITIES)[0]
            for _ in range(rng.randint(4, 7)):
                number += rng.randint(1, 9)
                wide = rng.random() < 0.7
                meta = {"camera": camera, "taken_at": f"{day.isoformat()}T{rng.randint(8, 19):02d}:"
                        f"{rng.randint(0, 59):02d}:00Z", "width": 4032 if wide else 3024,
                        "height": 3024 if wide else 4032, "location": city}
                self.blob(album, f"IMG_{number:04d}.jpg", rng.randint(1_800_000, 5_200_000), user, meta)

    def colleague_home(self, colleague: Record) -> None:
        user = colleague["id"]
        home = self.dir(self.child("/home"), user, user, mode=0o751)  # others may pass through, not list
        self.file(home, ".bashrc", "export EDITOR=nano\n", user)
        private = self.dir(home, "private", user, mode=0o700)
        self.file(private, "salary-review.md", "# Salary review\n\nAsk for the senior title this year.\n", user,
                  mode=0o600)
        public = self.dir(home, "public", user)
        self.file(public, "shared-notes.md", "# Shared notes\n\nStaging deploys happen on Thursdays.\n"
                  "TODO: move the deploy script to the team repo.\n", user)
        self.file(public, "deploy.sh", "#!/bin/sh\nset -e\nnpm run build\nrsync -a dist/ staging:/srv/www/\n", user,
                  mode=0o755)
        old = self.file(public, "old-deploy.sh", "#!/bin/sh\nscp -r dist staging:/srv/www\n", user, mode=0o755)
        self.trash_node(old, f"{colleague['home']}/public/old-deploy.sh", user)

    def guest_home(self, guest: Record) -> None:
        user = guest["id"]
        home = self.dir(self.child("/home"), user, user, mode=0o700)
        self.file(home, "notes.txt", "Wi-Fi password is on the fridge.\n", user)

    def shared(self, me: Record, colleague: Record) -> None:
        team = self.dir(self.child("/srv"), "team", ROOT, mode=0o775, group="staff")
        self.file(team, "roadmap.md", "# Team roadmap\n\n- Q1: ship the trail planner beta\n- Q2: invoices v2\n",
                  colleague["id"], mode=0o664, group="staff")
        self.file(team, "onboarding.md", "# Onboarding\n\n1. Get an account\n2. Read the roadmap\n3. Say hi\n",
                  me["id"], mode=0o664, group="staff")
        self.file(team, "on-call.txt", f"Week 10: {colleague['id']}\nWeek 11: {me['id']}\n", ROOT, group="staff")

    def finish(self, me: Record, colleague: Record) -> None:
        """Backups each user keeps as archives, then usage and quotas from what they own."""
        state = self.state
        for owner, name, source in ((me, "meetings-backup", "notes/meetings"), (colleague, "dotfiles", ".bashrc")):
            top = self.child(f"{owner['home']}/{source}")
            entries = _archive_entries(state, top, top["name"], None, f"{owner['home']}/{source}")
            _insert_archive(state, owner["id"], name, "zip", [f"~/{source}"], entries, self.ago(20, 40))
        used: dict[str, int] = {}
        for node in state.nodes.all():
            if node["kind"] == "file":
                _add(used, node["owner"], node["size"])
        for archive in state.archives.all():
            _add(used, archive["owner"], archive["size"])
        for user in state.users.all():
            bytes_used = used.get(user["id"], 0)
            quota = None if user["id"] == ROOT else max(16, math.ceil(bytes_used * 1.25 / MIB)) * MIB
            state.users.update(user["id"], used_bytes=bytes_used, quota_bytes=quota)

    def child(self, path: str) -> Record:
        node = self.state.nodes.get(self.state.get_var("root_id"))
        for name in path.strip("/").split("/"):
            node = self.state.nodes.first(dirent=f"{node['id']}/{name}")
        return node

    def trash_node(self, node: Record, original: str, owner: str) -> None:
        _trash(self.state, node, original, owner, self.ago(2, 12))


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


def _readme(name: str, description: str, usage: str, rng: random.Random) -> str:
    return (f"# {name}\n\n{description}\n\n## Install\n\n    {usage}\n\n## Usage\n\nRun with `--help` for every "
            f"option.\n\n## Status\n\n{rng.choice(STATUSES).capitalize()}.\n")


def _python_core(noun: str, description: str, rng: random.Random) -> str:
    cls = noun.capitalize()
    return f'''"""Core logic: {description.lower()}"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class {cls}:
    name: str
    value: float


def parse_{noun}s(text: str) -> list[{cls}]:
    """Parse {noun}s from a JSON document."""
    return [{cls}(**item) for item in json.loads(text)]


def summarize_{noun}s(items: list[{cls}]) -> dict[str, float]:
    # TODO: {rng.choice(TODOS)}
    if not items:
        return {{"count": 0, "total": 0.0}}
    total = sum(item.value for item in items)
    return {{"count": len(items), "total": round(total, 2), "average": round(total / len(items), 2)}}
'''


def _python_cli(package: str, noun: str) -> str:
    return f'''import argparse
import sys

from {package}.core import parse_{noun}s, summarize_{noun}s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source", help="JSON file with {noun}s")
    args = parser.parse_args()
    with open(args.source) as handle:
        print(summarize_{noun}s(parse_{noun}s(handle.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _python_test(package: str, noun: str) -> str:
    return f'''from {package}.core import parse_{noun}s, summarize_{noun}s


def test_summary_of_two():
    items = parse_{noun}s('[{{"name": "a", "value": 1}}, {{"name": "b", "value": 3}}]')
    assert summarize_{noun}s(items) == {{"count": 2, "total": 4, "average": 2}}


def test_empty():
    assert summarize_{noun}s([])["count"] == 0
'''


def _js_index(noun: str, rng: random.Random) -> str:
    return f'''const {{ format{noun.capitalize()} }} = require("./utils");

// TODO: {rng.choice(TODOS)}
function main(argv) {{
  const name = argv[2] || "demo";
  console.log(format{noun.capitalize()}({{ name, createdAt: new Date() }}));
}}

main(process.argv);
'''


def _js_utils(noun: str) -> str:
    return f'''function format{noun.capitalize()}({noun}) {{
  return `${{{noun}.name}} (${{{noun}.createdAt.toISOString().slice(0, 10)}})`;
}}

module.exports = {{ format{noun.capitalize()} }};
'''


def _js_test(noun: str) -> str:
    return f'''const test = require("node:test");
const assert = require("node:assert");
const {{ format{noun.capitalize()} }} = require("../src/utils");

test("formats a {noun}", () => {{
  const out = format{noun.capitalize()}({{ name: "x", createdAt: new Date("2026-01-02") }});
  assert.strictEqual(out, "x (2026-01-02)");
}});
'''


# -- examples (computed from the live state, so they hold for any seed) ------------------------------


# The conformance kit also runs every example one after another in a single session, so these
# helpers never raise: they fall back to paths that exist in any state, and ``_quietly`` prepares
# what an example needs unless it is already there.


def _quietly(tool: Any, state: FsState, *args: Any) -> None:
    try:
        tool(state, *args)
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
        _quietly(create_archive, s, "example-backup", ["~/.bashrc"])
    archive = s.archives.first(owner=s.get_var("user"))
    return archive["id"] if archive else "arc_none"


def _my_trash(s: FsState) -> str:
    if s.trash.first(owner=s.get_var("user")) is None:
        _quietly(create_file, s, "~/discarded.txt", "an old note\n")
        _quietly(move_to_trash, s, "~/discarded.txt")
    item = s.trash.first(owner=s.get_var("user"))
    return item["id"] if item else "trs_none"


def _with_empty_dir(s: FsState) -> dict[str, Any]:
    _quietly(make_directory, s, "~/empty-dir")
    return {"path": "~/empty-dir"}


def _edited_copy(s: FsState) -> dict[str, Any]:
    first = _meetings(s)[0]
    _quietly(copy_path, s, first, "~/standup-draft.md")
    _quietly(edit_file, s, "~/standup-draft.md", "## Updates", "## Updates\n- demo went well")
    return {"path_a": first, "path_b": "~/standup-draft.md"}


# -- the server and its tools ------------------------------------------------------------------------

server = Server(
    "filesystem",
    domain="productivity",
    description="A personal computer's file tree for one signed-in user: browse, read, write, edit, move, copy "
    "and search files; permissions and ownership, symlinks, diffs and checksums, archives, disk usage, quotas "
    "and a trash. Paths are POSIX-style; ~ is the home directory.",
    state=FsState,
    seed=build_filesystem,
    options=FsOptions,
)

_PATH_HELP = "absolute (/home/...), relative to the working directory, or ~/... for the home directory"
AnyPath = Annotated[str, ref("file", f"Path of an existing file, directory or symlink: {_PATH_HELP}.")]
FilePath = Annotated[str, ref("file", f"Path of an existing file: {_PATH_HELP}.")]
DirPath = Annotated[str, ref("directory", f"Path of an existing directory: {_PATH_HELP}.")]
NewPath = Annotated[str, Field(description=f"Path to create: {_PATH_HELP}. Its directory must exist.")]
Mode = Annotated[str, Field(pattern=r"^[0-7]{3,4}$", description="Octal permission bits, e.g. 644, 0600 or 1777.")]
Content = Annotated[str, Field(max_length=MAX_WRITE_CHARS, description="Text to write (UTF-8).")]
Limit = Annotated[int, Field(ge=1, le=100, description="Page size: how many results to return (1-100).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]
Lines = Annotated[int, Field(ge=1, le=500, description="How many lines to return (1-500).")]
FollowLinks = Annotated[bool, Field(description="If the path is a symlink, describe its target (true) or the link "
                                                "itself (false).")]
ArchiveId = Annotated[str, ref("archive", "Id of one of your archives (arc_...), from list_archives or create_archive.")]
TrashId = Annotated[str, ref("trash_item", "Id of an item in your trash (trs_...), from list_trash or move_to_trash.")]


# -- session ------------------------------------------------------------------------------------------


@server.tool(
    read_only=True,
    reads=["user", "directory"],
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


def _here(a: dict, key: str, found: list[str]) -> list[str]:
    """Templates for a call without the directory ``key``: it means the working directory."""
    return found if key in a else [t.replace("{" + key + "}", "the current directory") for t in found]


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


# -- files ------------------------------------------------------------------------------------------


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


# -- moving and copying --------------------------------------------------------------------------


def _destination(state: FsState, destination: str, name: str, *, follow: bool) -> Loc:
    """Where a move or copy lands: inside ``destination`` when it is an existing directory (like mv
    and cp), else at ``destination`` itself."""
    loc = _locate(state, destination, must_exist=False)
    if loc.node is not None and loc.node["kind"] == "directory":
        inside = _child_loc(state, loc, name)
        if follow and inside.node is not None and inside.node["kind"] == "symlink":
            return _locate(state, inside.path, must_exist=False)
        return inside
    return loc if follow else _locate(state, destination, follow=False, must_exist=False)


def _require_outside(source: Loc, target: Loc) -> None:
    require(target.path != source.path, f"{source.path} and the destination are the same", reason="SAME_PATH",
            error=InvalidArgument, path=source.path)
    if _require_existing(source)["kind"] == "directory":
        require(not target.path.startswith(source.path.rstrip("/") + "/"),
                f"cannot put {source.path} inside itself ({target.path})", reason="DESTINATION_INSIDE_SOURCE",
                error=InvalidArgument, path=source.path, destination=target.path)


def _move_path_asks(a: dict) -> list[str]:
    """A destination named like a file (with an extension) is a rename; otherwise a folder to move into."""
    if "." in str(a.get("destination", "")).rsplit("/", 1)[-1].lstrip("."):
        found = ["rename {source} to {destination}", "move {source} to {destination}",
                 "give {source} the new name {destination}"]
        overwriting = ["rename {source} to {destination}, replacing the file that's there",
                       "move {source} to {destination} and overwrite the existing one"]
    else:
        found = ["move {source} into {destination}", "put {source} in {destination}",
                 "mv {source} over to {destination}", "file {source} away in {destination}"]
        overwriting = ["move {source} into {destination}, replacing whatever has the same name there",
                       "move {source} over to {destination}, overwriting the old one"]
    return found + overwriting if a.get("overwrite") else found


@server.tool(
    destructive=True,  # with overwrite, replaces what was at the destination
    idempotent=True,  # a repeat finds no source (PATH_NOT_FOUND)
    reads=["file", "directory"],
    mutates=["file", "directory", "symlink"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "IS_A_DIRECTORY", "DIRECTORY_NOT_EMPTY", "SAME_PATH",
            "DESTINATION_INSIDE_SOURCE", "DIRECTORY_IN_USE", "OPERATION_NOT_PERMITTED"],
    examples=[{"source": "~/notes/ideas.md", "destination": "~/Documents"},
              {"source": "~/notes/todo.md", "destination": "~/notes/todo-2026.md"}],
    asks=_move_path_asks,
    values={"destination": lambda rng, s: rng.choice(DESTINATIONS)},
)
def move_path(
    state: FsState,
    source: AnyPath,
    destination: Annotated[str, Field(description="New path, or an existing directory to move the source into.")],
    overwrite: Annotated[bool, Field(description="Replace an existing file (or empty directory) at the "
                                                 "destination.")] = False,
) -> dict:
    """Move or rename a file, directory or symlink (mv); a directory moves with everything inside.
    If destination is an existing directory the source goes inside it under its own name. Returns
    the old and new paths. Fails with ALREADY_EXISTS (pass overwrite), IS_A_DIRECTORY /
    NOT_A_DIRECTORY (overwrite across kinds), DIRECTORY_NOT_EMPTY (overwriting a non-empty
    directory), SAME_PATH, DESTINATION_INSIDE_SOURCE, DIRECTORY_IN_USE, PERMISSION_DENIED (write
    permission on both directories; sticky /tmp), OPERATION_NOT_PERMITTED (the root) or a path
    error."""
    src = _locate(state, source, follow=False)
    node = _require_existing(src)
    require(node["parent_id"] is not None, "the root directory cannot be moved", reason="OPERATION_NOT_PERMITTED",
            error=PermissionDenied, path="/")
    target = _destination(state, destination, node["name"], follow=False)
    _require_outside(src, target)
    user = _user(state)
    _require_unlink(user, src)
    _require_create(user, target)
    replaced: list[Record] = []
    if target.node is not None:
        require(overwrite, f"{target.path} already exists; pass overwrite=true to replace it", reason="ALREADY_EXISTS",
                error=Conflict, path=target.path)
        existing = target.node
        if existing["kind"] == "directory":
            require(node["kind"] == "directory", f"{target.path} is a directory", reason="IS_A_DIRECTORY",
                    path=target.path)
            require(not state.nodes.where(parent_id=existing["id"]), f"{target.path} is not empty",
                    reason="DIRECTORY_NOT_EMPTY", path=target.path)
            _require_not_in_use(state, target)
        else:
            require(node["kind"] != "directory", f"{target.path} is not a directory", reason="NOT_A_DIRECTORY",
                    path=target.path)
        _require_unlink(user, target)
        replaced = [existing]
    _delete_nodes(state, replaced)
    now = _now(state)
    state.nodes.update(node["id"], parent_id=target.parent["id"], name=target.name,
                       dirent=f"{target.parent['id']}/{target.name}", mime=_renamed_mime(node, target.name))
    for directory in dict.fromkeys((src.parent["id"], target.parent["id"])):
        state.nodes.update(directory, modified_at=now)
    return {"source": src.path, "destination": target.path, "type": node["kind"], "replaced": bool(replaced)}


def _copy_path_asks(a: dict) -> list[str]:
    found = ["copy {source} to {destination}", "make a copy of {source} at {destination}",
             "duplicate {source} into {destination}"]
    if a.get("recursive"):
        found += ["copy {source} with everything inside to {destination}",
                  "make a full copy of {source}, subfolders and all, at {destination}"]
    if a.get("overwrite"):
        found += [t + ", replacing the file that's there" for t in found[:2]]
    return found


@server.tool(
    destructive=True,  # with overwrite, replaces the destination file's content
    # not idempotent: copying a directory again nests a second copy inside the first, as cp -r does
    reads=["file", "directory"],
    produces=["file", "directory"],
    mutates=["file", "user"],
    errors=[*RESOLVE_ERRORS, "ALREADY_EXISTS", "IS_A_DIRECTORY", "SAME_PATH", "DESTINATION_INSIDE_SOURCE",
            "QUOTA_EXCEEDED"],
    examples=[lambda s: {"source": _project(s), "destination": f"{_project(s)}-backup", "recursive": True},
              {"source": "~/notes/todo.md", "destination": "/tmp"}],
    asks=_copy_path_asks,
    values={"destination": lambda rng, s: rng.choice(DESTINATIONS)},
)
def copy_path(
    state: FsState,
    source: AnyPath,
    destination: Annotated[str, Field(description="Path of the copy, or an existing directory to copy into.")],
    recursive: Annotated[bool, Field(description="Required to copy a directory with everything inside "
                                                 "(cp -r).")] = False,
    overwrite: Annotated[bool, Field(description="Replace the content of an existing file at the "
                                                 "destination.")] = False,
) -> dict:
    """Copy a file, or a directory with everything inside (cp -r). The copy belongs to the current
    user, keeps the modes and counts against their quota; symlinks inside a directory are copied as
    links. If destination is an existing directory the copy goes inside it. Directories are never
    merged. Returns the copy's path, entries and bytes copied. Fails with IS_A_DIRECTORY (a directory
    without recursive, or a directory in the way), ALREADY_EXISTS (pass overwrite for a file),
    SAME_PATH, DESTINATION_INSIDE_SOURCE, PERMISSION_DENIED (read permission on everything copied,
    write permission on the destination), QUOTA_EXCEEDED or a path error."""
    src = _locate(state, source)
    node = _require_existing(src)
    require(node["kind"] != "directory" or recursive, f"{src.path} is a directory; pass recursive=true to copy it",
            reason="IS_A_DIRECTORY", path=src.path)
    target = _destination(state, destination, node["name"], follow=True)
    _require_outside(src, target)
    require(target.node is None or target.node["id"] != node["id"], f"{target.path} is {src.path}",
            reason="SAME_PATH", error=InvalidArgument, path=src.path)
    user = _user(state)
    top_path = src.path
    sources = _subtree(state, node)
    for each, rel in sources:
        where = _under(top_path, rel)
        if each["kind"] != "symlink":
            _require_access(user, each, "r", where)
        if each["kind"] == "directory":
            _require_access(user, each, "x", where)
    if target.node is not None:
        require(overwrite, f"{target.path} already exists; pass overwrite=true to replace the file",
                reason="ALREADY_EXISTS", error=Conflict, path=target.path)
        require(target.node["kind"] != "directory" and node["kind"] != "directory",
                f"{target.path} is in the way: directories are never merged or replaced by a copy",
                reason="IS_A_DIRECTORY", path=target.path)
        _require_access(user, target.node, "w", target.path)
        if node["binary"]:
            _charge(state, {target.node["owner"]: node["size"] - target.node["size"]})
            fields = {f: node[f] for f in ("size", "content", "binary", "mime", "sha256", "meta")}
            if any(target.node[k] != v for k, v in fields.items()):
                state.nodes.update(target.node["id"], **fields, modified_at=_now(state))
        else:
            _set_text(state, target, node["content"] or "")
        return {"source": src.path, "destination": target.path, "entries_copied": 1, "bytes_copied": node["size"],
                "replaced": True}
    _require_create(user, target)
    copied_bytes = sum(n["size"] for n, _ in sources if n["kind"] == "file")
    _charge(state, {user["id"]: copied_bytes})
    now, new_ids = _now(state), {}
    for each, _rel in sources:
        parent = target.parent if each["id"] == node["id"] else state.nodes.get(new_ids[each["parent_id"]])
        name = target.name if each["id"] == node["id"] else each["name"]
        copy = _insert_node(state, parent, name, each["kind"], owner=user["id"], group=user["groups"][0], when=now,
                            **_copied(each))
        new_ids[each["id"]] = copy["id"]
    state.nodes.update(target.parent["id"], modified_at=now)
    return {"source": src.path, "destination": target.path, "entries_copied": len(sources),
            "bytes_copied": copied_bytes, "replaced": False}


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


# -- search and text tools ----------------------------------------------------------------------------


def _walk(state: FsState, top: Loc, max_depth: int | None = None) -> tuple[list[tuple[Record, str, int]], int]:
    """(node, path, depth) under a directory in name order, not following symlinks, skipping
    directories the user cannot read; and how many were skipped."""
    user = _user(state)
    out, skipped = [], 0
    stack = [(c, _child_path(top.path, c["name"]), 1) for c in reversed(_children(state, top.node))]
    while stack:
        node, path, depth = stack.pop()
        out.append((node, path, depth))
        if node["kind"] != "directory" or (max_depth is not None and depth >= max_depth):
            continue
        if not (_allowed(user, node, "r") and _allowed(user, node, "x")):
            skipped += 1
            continue
        stack.extend((c, _child_path(path, c["name"]), depth + 1) for c in reversed(_children(state, node)))
    return out, skipped


def _search_root(state: FsState, directory: str) -> Loc:
    loc = _locate(state, directory)
    node = _require_directory(loc)
    user = _user(state)
    _require_access(user, node, "r", loc.path)
    return loc


def _find_files_asks(a: dict) -> list[str]:
    """Filters are slots, in some templates; the entry type and case-insensitivity are said in words."""
    found = ["list everything under {directory}", "give me a recursive listing of {directory}",
             "show me all the entries in {directory}, subfolders included"]
    if "name" in a:
        found += ["find anything named {name} under {directory}", "look for {name} anywhere in {directory}",
                  "search {directory} for entries matching {name}"]
        if a.get("ignore_case"):
            found.append("find anything named {name} under {directory}, ignoring case")
    what = {"file": "files", "directory": "folders", "symlink": "symlinks"}.get(a.get("type"))
    if what:
        found += [f"list all the {what} under {{directory}}", f"look through {{directory}} for {what}"]
        if "name" in a:
            found.append(f"find {what} named {{name}} under {{directory}}")
    if "min_size" in a:
        found.append("find files of at least {min_size} bytes in {directory}")
    if "max_size" in a:
        found.append("find files no bigger than {max_size} bytes in {directory}")
    if "max_depth" in a:
        found.append("list everything in {directory}, going no deeper than depth {max_depth}")
    return _here(a, "directory", found)


@server.tool(
    read_only=True,
    reads=["directory", "file", "symlink"],
    errors=RESOLVE_ERRORS,
    examples=[{"directory": "~/projects", "name": "*.py"}, {"directory": "~", "type": "directory", "max_depth": 1},
              {"directory": "~/Pictures", "min_size": 3_000_000}],
    asks=_find_files_asks,
    values={"name": lambda rng, s: rng.choice(NAME_GLOBS)},
)
def find_files(
    state: FsState,
    directory: Annotated[str, ref("directory", f"Where to search, recursively: {_PATH_HELP}.")] = ".",
    name: Annotated[str | None, Field(max_length=255, description="Glob on the entry's name: * any run, ? one "
                                                                  "character, [abc] a set, e.g. *.md.")] = None,
    type: Annotated[NodeType | None, Field(description="Only entries of this type.")] = None,
    min_size: Annotated[int | None, Field(ge=0, description="Only files of at least this many bytes.")] = None,
    max_size: Annotated[int | None, Field(ge=0, description="Only files of at most this many bytes.")] = None,
    max_depth: Annotated[int | None, Field(ge=1, le=64, description="How deep to descend (1 = direct "
                                                                    "entries only).")] = None,
    ignore_case: Annotated[bool, Field(description="Match the name glob case-insensitively.")] = False,
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict:
    """Find entries under a directory (find) by name glob, type, size range and depth, including
    hidden ones; symlinks are listed, not followed. Returns a page of matches (path, type, size,
    modified time), the total, next_offset and how many directories could not be read. Fails with
    NOT_A_DIRECTORY, PERMISSION_DENIED or a path error."""
    top = _search_root(state, directory)
    walked, skipped = _walk(state, top, max_depth)
    pattern = None if name is None else (name.lower() if ignore_case else name)

    def wanted(node: Record) -> bool:
        if type is not None and node["kind"] != type:
            return False
        if (min_size is not None or max_size is not None) and node["kind"] != "file":
            return False
        if not (min_size or 0) <= node["size"] <= (max_size if max_size is not None else node["size"]):
            return False
        label = node["name"].lower() if ignore_case else node["name"]
        return pattern is None or fnmatch.fnmatchcase(label, pattern)

    found = [{"path": path, "type": node["kind"], "size": node["size"], "modified_at": node["modified_at"]}
             for node, path, _ in walked if wanted(node)]
    return {"directory": top.path, **paginate(found, limit=limit, offset=offset, key="matches"),
            "unreadable_directories": skipped}


def _search_contents_asks(a: dict) -> list[str]:
    found = ['search the files in {directory} for "{text}"', 'find which files under {directory} mention "{text}"',
             'grep {directory} for "{text}"', 'look for "{text}" in everything under {directory}']
    if "name" in a:
        found.append('look for "{text}" in the {name} files under {directory}')
    if a.get("ignore_case"):
        found += ['search the files in {directory} for "{text}", ignoring case',
                  'find files under {directory} that mention "{text}" in any capitalization']
    return _here(a, "directory", found)


@server.tool(
    read_only=True,
    reads=["directory", "file"],
    errors=RESOLVE_ERRORS,
    examples=[{"directory": "~", "text": "TODO"}, {"directory": "~/projects", "text": "def ", "name": "*.py"},
              {"directory": "/srv/team", "text": "roadmap", "ignore_case": True}],
    asks=_search_contents_asks,
    values={"text": lambda rng, s: rng.choice(SEARCH_TEXTS)},
)
def search_file_contents(
    state: FsState,
    text: Annotated[str, Field(min_length=1, max_length=200, description="Text to look for (a plain substring, "
                                                                         "not a regex).")],
    directory: Annotated[str, ref("directory", f"Where to search, recursively: {_PATH_HELP}.")] = ".",
    name: Annotated[str | None, Field(max_length=255, description="Only files whose name matches this glob, "
                                                                  "e.g. *.py.")] = None,
    ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    limit: Limit = 20,
    offset: Offset = 0,
) -> dict:
    """Search the text files under a directory for a substring (grep -rF -l). Returns a page of
    files with how many lines match and the first matching line, the total, next_offset, and how
    many files or directories were skipped as unreadable (binary files are skipped). Fails with
    NOT_A_DIRECTORY, PERMISSION_DENIED or a path error."""
    top = _search_root(state, directory)
    walked, skipped = _walk(state, top)
    user = _user(state)
    needle = text.lower() if ignore_case else text
    results = []
    for node, path, _ in walked:
        if node["kind"] != "file" or node["binary"] or (name is not None and not fnmatch.fnmatchcase(node["name"], name)):
            continue
        if not _allowed(user, node, "r"):
            skipped += 1
            continue
        haystack = node["content"] or ""
        if needle not in (haystack.lower() if ignore_case else haystack):
            continue
        hits = [(n, line) for n, line in enumerate(_lines(haystack), 1) if needle in (line.lower() if ignore_case
                                                                                      else line)]
        results.append({"path": path, "matching_lines": len(hits), "first_match": {"line_number": hits[0][0],
                                                                                   "line": hits[0][1][:300]}})
    return {"directory": top.path, "text": text, **paginate(results, limit=limit, offset=offset, key="files"),
            "unreadable_skipped": skipped}


def _grep_file_asks(a: dict) -> list[str]:
    found = ['find the lines in {path} that mention "{pattern}"', 'grep {path} for "{pattern}"',
             'show where "{pattern}" appears in {path}']
    if "context" in a:
        found.append('search {path} for "{pattern}" plus context ({context} before and after each hit)')
    if a.get("invert"):
        found += ['show the lines of {path} that don\'t contain "{pattern}"',
                  'filter out the lines with "{pattern}" from {path} and show me the rest']
    if a.get("ignore_case"):
        found += ['grep {path} for "{pattern}", ignoring case',
                  'find the lines in {path} that mention "{pattern}" in any capitalization']
        if a.get("invert"):
            found.append('list every line in {path} without "{pattern}", ignoring case')
    return found


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE"],
    examples=[lambda s: {"path": _python_file(s), "pattern": "TODO"},
              lambda s: {"path": _python_file(s), "pattern": "return", "context": 1, "ignore_case": True},
              {"path": "~/notes/todo.md", "pattern": "[x]", "invert": True}],
    asks=_grep_file_asks,
    values={"pattern": lambda rng, s: rng.choice(LINE_PATTERNS)},
)
def grep_file(
    state: FsState,
    path: FilePath,
    pattern: Annotated[str, Field(min_length=1, max_length=200, description="Text to look for in each line (a plain "
                                                                            "substring, not a regex).")],
    ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    invert: Annotated[bool, Field(description="Return the lines that do NOT contain the pattern.")] = False,
    context: Annotated[int, Field(ge=0, le=10, description="Lines of context to show before and after each "
                                                           "match.")] = 0,
    max_matches: Annotated[int, Field(ge=1, le=500, description="Stop after this many matches.")] = 100,
) -> dict:
    """Matching lines of one text file (grep -nF), with line numbers and optional context lines.
    Returns the matches, the total number of matching lines and whether the list was cut at
    max_matches. Fails with IS_A_DIRECTORY, BINARY_FILE, PERMISSION_DENIED or a path error."""
    loc = _locate(state, path)
    content = _text_of(loc)
    _require_access(_user(state), loc.node, "r", loc.path)
    lines = _lines(content)
    needle = pattern.lower() if ignore_case else pattern
    numbers = [i for i, line in enumerate(lines) if (needle in (line.lower() if ignore_case else line)) != invert]
    matches = []
    for i in numbers[:max_matches]:
        match: dict[str, Any] = {"line_number": i + 1, "line": lines[i]}
        if context:
            match["before"] = lines[max(0, i - context) : i]
            match["after"] = lines[i + 1 : i + 1 + context]
        matches.append(match)
    return {"path": loc.path, "pattern": pattern, "match_count": len(numbers), "matches": matches,
            "truncated": len(numbers) > max_matches}


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE", "FILE_TOO_LARGE"],
    examples=[_edited_copy, lambda s: {"path_a": _meetings(s)[0], "path_b": _meetings(s)[1], "context_lines": 1}],
    asks=("compare {path_a} with {path_b}", "show the differences between {path_a} and {path_b}",
          "diff {path_a} against {path_b}",
          "show what changed between {path_a} and {path_b}, with a context size of {context_lines}"),
)
def diff_files(
    state: FsState,
    path_a: Annotated[str, ref("file", f"The original file: {_PATH_HELP}.")],
    path_b: Annotated[str, ref("file", f"The changed file: {_PATH_HELP}.")],
    context_lines: Annotated[int, Field(ge=0, le=20, description="Unchanged lines shown around each change.")] = 3,
) -> dict:
    """Compare two text files line by line. Returns whether they are identical, a unified diff
    (diff -u: lines starting with - are only in path_a, + only in path_b) and the counts of added
    and removed lines. Fails with IS_A_DIRECTORY, BINARY_FILE (compare hashes with hash_file
    instead), FILE_TOO_LARGE (either side over 256 KiB), PERMISSION_DENIED or a path error."""
    sides = []
    for raw in (path_a, path_b):
        loc = _locate(state, raw)
        content = _text_of(loc)
        _require_access(_user(state), loc.node, "r", loc.path)
        require(loc.node["size"] <= MAX_DIFF_BYTES, f"{loc.path} is {_human(loc.node['size'])}; diffs are limited to "
                f"{_human(MAX_DIFF_BYTES)} per file", reason="FILE_TOO_LARGE", error=ResourceExhausted, path=loc.path)
        sides.append((loc.path, _lines(content)))
    (name_a, a), (name_b, b) = sides
    diff = list(difflib.unified_diff(a, b, name_a, name_b, n=context_lines, lineterm=""))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    return {"path_a": name_a, "path_b": name_b, "identical": a == b, "lines_added": added, "lines_removed": removed,
            "diff": "\n".join(diff)}


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY"],
    examples=[{"path": "~/.bashrc"}, lambda s: {"path": _photo(s)},
              {"path": "/etc/hostname", "expected": "0" * 64}],
    asks=("get the SHA-256 checksum of {path}", "compute the hash of {path}",
          "check {path} against the checksum {expected}", "verify that {path} has the SHA-256 {expected}"),
)
def hash_file(
    state: FsState,
    path: FilePath,
    expected: Annotated[str | None, Field(pattern=r"^[0-9a-fA-F]{64}$", description="A SHA-256 to compare "
                                                                                     "with (64 hex digits).")] = None,
) -> dict:
    """The SHA-256 checksum of a file (text or binary) and its size; with expected, whether it
    matches (to verify a download or a copy). Fails with IS_A_DIRECTORY, PERMISSION_DENIED (no
    read permission) or a path error."""
    loc = _locate(state, path)
    node = _require_file(loc)
    _require_access(_user(state), node, "r", loc.path)
    digest = _sha256(node)
    return {"path": loc.path, "sha256": digest, "size": node["size"],
            "matches": None if expected is None else digest == expected.lower()}


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE"],
    examples=[{"paths": ["~/notes/todo.md", "~/.bashrc"]}, lambda s: {"paths": _meetings(s)}],
    asks=("count the words in {paths}", "give me line and word counts for {paths}", "run a word count on {paths}",
          "tell me how many lines, words and characters are in {paths}"),
)
def count_words(
    state: FsState,
    paths: Annotated[list[str], Field(min_length=1, max_length=50, description="Text files to count (1-50 paths).")],
) -> dict:
    """Line, word, character and byte counts of text files (wc), per file and in total. Fails with
    IS_A_DIRECTORY, BINARY_FILE, PERMISSION_DENIED or a path error on any of them."""
    files = []
    for raw in paths:
        loc = _locate(state, raw)
        content = _text_of(loc)
        _require_access(_user(state), loc.node, "r", loc.path)
        files.append({"path": loc.path, "lines": content.count("\n"), "words": len(content.split()),
                      "characters": len(content), "bytes": loc.node["size"]})
    totals = {k: sum(f[k] for f in files) for k in ("lines", "words", "characters", "bytes")}
    return {"files": files, "total": totals}


def _edge_lines(state: FsState, path: str, lines: int, *, tail: bool) -> dict:
    loc = _locate(state, path)
    content = _text_of(loc)
    _require_access(_user(state), loc.node, "r", loc.path)
    all_lines = content.splitlines(keepends=True)
    start = max(0, len(all_lines) - lines) if tail else 0
    window = all_lines[start : start + lines]
    return {"path": loc.path, "content": "".join(window), "start_line": start + 1, "lines_returned": len(window),
            "total_lines": len(all_lines)}


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE"],
    examples=[{"path": "~/Documents/budget-2026.csv", "lines": 5}, {"path": "/etc/passwd"}],
    asks=("show the first few lines of {path}", "show me the top {lines} lines of {path}",
          "peek at the beginning of {path}", "print the first {lines} lines of {path}"),
    values={"lines": lambda rng, s: rng.choice((3, 5, 10, 20))},
)
def head_file(state: FsState, path: FilePath, lines: Lines = 10) -> dict:
    """The first lines of a text file (head -n). Returns their text, the first line number, how many
    came back and the file's total lines. Fails with IS_A_DIRECTORY, BINARY_FILE,
    PERMISSION_DENIED or a path error."""
    return _edge_lines(state, path, lines, tail=False)


@server.tool(
    read_only=True,
    reads=["file"],
    errors=[*RESOLVE_ERRORS, "IS_A_DIRECTORY", "BINARY_FILE"],
    examples=[{"path": "~/Documents/budget-2026.csv", "lines": 3}, {"path": "/var/log/apt/history.log"}],
    asks=("show the last {lines} lines of {path}", "show me the end of {path}", "tail {path}",
          "show me the newest entries at the bottom of {path}", "print the final {lines} lines of {path}"),
    values={"lines": lambda rng, s: rng.choice((3, 5, 10, 20, 50))},
)
def tail_file(state: FsState, path: FilePath, lines: Lines = 10) -> dict:
    """The last lines of a text file (tail -n), e.g. the newest entries of a log. Returns their text,
    the first returned line's number, how many came back and the file's total lines. Fails with
    IS_A_DIRECTORY, BINARY_FILE, PERMISSION_DENIED or a path error."""
    return _edge_lines(state, path, lines, tail=True)


# -- archives ---------------------------------------------------------------------------------------


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
    path error."""
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
    for entry, path in creates:
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


# -- trash --------------------------------------------------------------------------------------------


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
    PATH_NOT_FOUND (its old directory is gone) or a path error."""
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


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
