"""Tools: finding files, searching and grepping text, diffs, checksums, word counts, head and
tail.
"""

from __future__ import annotations

import difflib
import fnmatch
from typing import Annotated, Any

from pydantic import Field

from prove_core.toolkit import Record, ResourceExhausted, paginate, ref, require
from prove_servers.filesystem.access import _allowed, _require_access, _user
from prove_servers.filesystem.app import (
    _PATH_HELP,
    LINE_PATTERNS,
    NAME_GLOBS,
    SEARCH_TEXTS,
    FilePath,
    Limit,
    Lines,
    Offset,
    _here,
    server,
)
from prove_servers.filesystem.examples import _edited_copy, _meetings, _photo, _python_file
from prove_servers.filesystem.model import MAX_DIFF_BYTES, RESOLVE_ERRORS, FsState, NodeType
from prove_servers.filesystem.nodes import _children, _human, _lines, _sha256
from prove_servers.filesystem.paths import Loc, _child_path, _locate, _require_directory, _require_file, _text_of


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
    answers=("path", "size"),
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
    answers=("path", "line_number", "line"),
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
    answers=("match_count", "line_number", "line"),
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
    answers=("identical", "lines_added", "lines_removed"),
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
    answers=("sha256",),
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
    answers=("lines", "words", "characters"),
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
    IS_A_DIRECTORY, BINARY_FILE, PERMISSION_DENIED or a path error on any of them (INVALID_PATH,
    PATH_OUTSIDE_ROOT, PATH_NOT_FOUND, NOT_A_DIRECTORY, SYMLINK_LOOP)."""
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
    answers=("content",),
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
    answers=("content",),
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
