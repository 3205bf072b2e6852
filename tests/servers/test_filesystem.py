"""The filesystem server's own rules: path safety, symlinks, permissions, quotas, files and
directories, moving and copying, search, archives and trash, each failure checked with its reason
and code. What every server guarantees is the conformance kit's (tests/servers/test_conformance.py).
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import pathlib
from typing import Any

import pytest

from prove_core.testing import ServerHarness, servers_registered_by
from prove_core.toolkit import Collection, State
from prove_servers import filesystem
from prove_servers.filesystem import MAX_SYMLINK_HOPS, MAX_TEXT_FILE_BYTES, FsOptions, server

TOOLS = server.tools
h = ServerHarness.fixture(server)


def people(h) -> tuple[str, str, str]:
    """(me, colleague, guest): the signed-in user, a staff colleague, a user in no shared group."""
    state = h.state
    me = state.get_var("user")
    colleague = next(m for m in state.groups.get("staff")["members"] if m != me)
    guest = next(m for m in state.groups.get("users")["members"] if m not in (me, colleague))
    return me, colleague, guest


def used(h, user: str) -> int:
    return h.state.users.get(user)["used_bytes"]


def recomputed_usage(state: State) -> dict[str, int]:
    totals: dict[str, int] = {}
    for node in state.nodes.all():
        if node["kind"] == "file":
            totals[node["owner"]] = totals.get(node["owner"], 0) + node["size"]
    for archive in state.archives.all():
        totals[archive["owner"]] = totals.get(archive["owner"], 0) + archive["size"]
    return totals


# -- declared surface, seed and the sandbox --------------------------------------------------------


def test_tool_surface_and_registration():
    assert set(TOOLS) == {
        "get_current_user", "list_users", "change_directory",
        "list_directory", "get_tree", "make_directory", "remove_directory", "get_disk_usage",
        "create_file", "read_file", "write_file", "append_to_file", "edit_file", "truncate_file", "delete_file",
        "touch_file", "get_file_info", "path_exists",
        "move_path", "copy_path", "change_mode", "change_owner", "create_symlink", "read_symlink",
        "find_files", "search_file_contents", "grep_file", "diff_files", "hash_file", "count_words", "head_file",
        "tail_file",
        "create_archive", "list_archives", "list_archive_entries", "extract_archive",
        "move_to_trash", "list_trash", "restore_from_trash", "empty_trash",
    }
    assert servers_registered_by(filesystem) == [server]
    assert (server.name, server.domain) == ("filesystem", "productivity")
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "get_current_user", "list_users", "list_directory", "get_tree", "get_disk_usage", "read_file",
        "get_file_info", "path_exists", "read_symlink", "find_files", "search_file_contents", "grep_file",
        "diff_files", "hash_file", "count_words", "head_file", "tail_file", "list_archives",
        "list_archive_entries", "list_trash",
    }
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"remove_directory", "write_file", "edit_file", "truncate_file", "delete_file",
                           "move_path", "copy_path", "extract_archive", "empty_trash", "restore_from_trash"}
    not_idempotent = {n for n, t in TOOLS.items() if not t.spec.annotations.idempotent}
    assert not_idempotent == {"append_to_file", "edit_file", "touch_file", "copy_path"}
    for name, tool in TOOLS.items():
        if not tool.spec.annotations.read_only:
            assert tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["create_archive"].spec.produces == ("archive",)
    assert TOOLS["move_to_trash"].spec.produces == ("trash_item",)
    assert TOOLS["extract_archive"].spec.entity_params() == {"archive_id": "archive", "destination": "directory"}
    assert TOOLS["restore_from_trash"].spec.entity_params() == {"trash_id": "trash_item"}
    assert TOOLS["read_file"].spec.entity_params() == {"path": "file"}


def test_every_write_example_changes_the_state(h):
    assert h.write_examples_changing_nothing() == []


def test_no_tool_touches_the_real_disk(h, monkeypatch):
    source = pathlib.Path(filesystem.__file__)  # read before the guard goes up (a package: every module)
    modules = sorted(source.parent.rglob("*.py")) if hasattr(filesystem, "__path__") else [source]
    imported, called = set(), set()
    for module in modules:
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add((node.module or "").split(".")[0])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    assert not imported & {"os", "io", "pathlib", "shutil", "tempfile", "subprocess", "glob", "zipfile", "tarfile"}
    assert not called & {"open", "eval", "exec", "compile", "__import__"}

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"real file system access: {args}")

    for module, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"),
                         (os, "listdir"), (os, "scandir"), (os, "remove"), (os, "mkdir"), (os, "rename")):
        monkeypatch.setattr(module, name, refuse)
    h.run_examples()
    h.session().fails("read_file", "PATH_NOT_FOUND", path="/etc/does-not-exist")


def test_tools_look_nodes_up_through_indexes_not_scans(h, monkeypatch):
    """Resolving, listing and writing use the parent_id / dirent indexes; no call walks the table."""
    h.runtime.seed_snapshot()  # seeding may scan; the tools may not
    node_scans, unindexed = [], []
    real_all, real_where = Collection.all, Collection.where

    def all_(self: Collection) -> list:
        if self.entity == "node":
            node_scans.append("all")
        return real_all(self)

    def where(self: Collection, predicate: Any = None, **equals: Any) -> list:
        if self.entity == "node" and not {"parent_id", "dirent"} & set(equals):
            unindexed.append(equals)
        return real_where(self, predicate, **equals)

    monkeypatch.setattr(Collection, "all", all_)
    monkeypatch.setattr(Collection, "where", where)
    h.run_examples()
    assert not node_scans and not unindexed


def test_ids_are_seeded_too(h):
    other = ServerHarness(server, seed=1)
    assert {n["id"] for n in h.state.nodes}.isdisjoint(n["id"] for n in other.state.nodes)


def test_seed_has_the_variety_tasks_need(h):
    state = h.state
    me, colleague, guest = people(h)
    assert state.users.get("root")["quota_bytes"] is None
    kinds = {n["kind"] for n in state.nodes}
    assert kinds == {"file", "directory", "symlink"}
    assert len(h.ok("list_directory", path="~/projects")["entries"]) == 4
    photos = h.ok("find_files", directory="~/Pictures", name="*.jpg", limit=100)
    assert photos["total"] >= 8
    info = h.ok("get_file_info", path=photos["matches"][0]["path"])
    assert info["binary"] and info["mime"] == "image/jpeg" and {"camera", "taken_at", "width"} <= set(info["photo"])
    assert h.ok("read_symlink", path="~/old-notes")["dangling"]
    assert h.ok("get_file_info", path="~/notes/archive/2024-taxes.md")["mode"] == "0444"
    assert h.ok("get_file_info", path="/tmp")["permissions"] == "drwxrwxrwt"
    assert h.ok("list_trash")["total"] == 1 and h.ok("list_archives")["total"] == 1
    assert state.trash.first(owner=colleague) and state.archives.first(owner=colleague)
    for user in (me, colleague, guest):
        record = state.users.get(user)
        assert 0 < record["used_bytes"] < record["quota_bytes"]
    assert recomputed_usage(state) == {u["id"]: u["used_bytes"] for u in state.users if u["used_bytes"]}
    assert h.ok("get_current_user")["working_directory"] == f"/home/{me}"


def test_a_ten_times_larger_seed_works_and_options_are_validated(h):
    big = ServerHarness(server, options=FsOptions(projects=40))
    assert len(big.state.nodes) > 4 * len(h.state.nodes)
    assert big.ok("list_directory", path="~/projects", limit=100)["total"] == 40
    big.run_examples()
    with pytest.raises(ValueError):
        FsOptions(projects=0)


# -- path safety ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/..", "/../etc/passwd", "~/../../../etc", "../../../..", "/home/../../tmp",
                                  "C:\\Windows\\system.ini", "c:/Users", "\\\\fileserver\\share\\x",
                                  "file:///etc/passwd", "s3://bucket/key"])
def test_paths_that_escape_the_root_are_refused(h, path):
    h.fails("read_file", "PATH_OUTSIDE_ROOT", "PERMISSION_DENIED", path=path)
    h.fails("write_file", "PATH_OUTSIDE_ROOT", path=path, content="x")
    h.fails("path_exists", "PATH_OUTSIDE_ROOT", path=path)


MALFORMED = {
    "empty": ("", "empty"),
    "NUL byte": ("notes/\x00todo.md", "NUL byte"),
    "control character": ("notes\n.md", "control characters"),
    "over-long path": ("/" + "/".join(["d"] * 600), "the limit is 1024"),  # short names, long path
    "over-long name": ("~/" + "n" * 256, "longer than 255 bytes"),
    "backslash": ("notes\\todo.md", "backslash"),
    "unknown home": ("~nobody/notes", "no user named"),
}


@pytest.mark.parametrize(("path", "why"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_paths_are_invalid(h, path, why):
    error = h.fails("read_file", "INVALID_PATH", "INVALID_ARGUMENT", path=path)
    assert why in error["message"]
    h.fails("create_file", "INVALID_PATH", path=path)
    h.fails("path_exists", "INVALID_PATH", path=path)


def test_dot_dot_inside_the_tree_is_normalized(h):
    me, _, _ = people(h)
    assert h.ok("read_file", path="/home/../etc/./hostname")["path"] == "/etc/hostname"
    assert h.ok("read_file", path="~/projects/../notes//todo.md")["path"] == f"/home/{me}/notes/todo.md"
    h.ok("change_directory", path="~/notes/meetings")
    assert h.ok("read_file", path="../todo.md")["path"] == f"/home/{me}/notes/todo.md"
    assert h.ok("path_exists", path="../../../../etc/motd")["exists"]
    h.fails("read_file", "PATH_OUTSIDE_ROOT", path="../../../../../etc/motd")


def test_symlinks_may_not_point_outside_the_tree(h):
    h.fails("create_symlink", "PATH_OUTSIDE_ROOT", path="~/escape", target="../../../../etc")
    h.fails("create_symlink", "PATH_OUTSIDE_ROOT", path="~/escape", target="C:\\Windows")
    h.fails("create_symlink", "INVALID_PATH", path="~/escape", target="notes/\x00")
    h.fails("create_symlink", "INVALID_PATH", path="~/escape", target="~/notes")
    # A link whose relative target was inside where it was made escapes once moved higher up.
    h.ok("make_directory", path="~/deep/er", parents=True)
    made = h.ok("create_symlink", path="~/deep/er/up", target="../../../../etc")
    assert made["resolves_to"] == "/etc"
    h.ok("move_path", source="~/deep/er/up", destination="~/up")
    assert h.ok("read_symlink", path="~/up")["problem"] == "PATH_OUTSIDE_ROOT"
    h.fails("read_file", "PATH_OUTSIDE_ROOT", path="~/up/hostname")
    h.fails("path_exists", "PATH_OUTSIDE_ROOT", path="~/up/hostname")


def test_symlink_loops_and_long_chains_are_bounded(h):
    h.ok("create_symlink", path="~/a", target="b")
    h.ok("create_symlink", path="~/b", target="a")
    made = h.ok("create_symlink", path="~/self", target="self/x")
    assert made["problem"] == "SYMLINK_LOOP"
    h.fails("read_file", "SYMLINK_LOOP", "FAILED_PRECONDITION", path="~/a")
    h.fails("list_directory", "SYMLINK_LOOP", path="~/self")
    assert h.ok("path_exists", path="~/a") == {"path": "~/a", "exists": False, "type": None,
                                                      "problem": "SYMLINK_LOOP"}
    assert h.ok("path_exists", path="~/a", follow_symlinks=False)["type"] == "symlink"
    assert h.ok("read_symlink", path="~/a")["problem"] == "SYMLINK_LOOP"
    h.ok("delete_file", path="~/a")  # a loop can still be removed
    # A chain of exactly MAX_SYMLINK_HOPS links resolves; one more is refused.
    for n in range(MAX_SYMLINK_HOPS + 1):
        h.ok("create_symlink", path=f"~/link{n}", target=f"link{n + 1}" if n < MAX_SYMLINK_HOPS else
           "notes/todo.md")
    assert h.ok("read_file", path="~/link1")["total_lines"] > 0
    h.fails("read_file", "SYMLINK_LOOP", path="~/link0")


# -- permissions ----------------------------------------------------------------------------------


def test_a_read_only_file_refuses_writes_until_its_mode_changes(h):
    taxes = "~/notes/archive/2024-taxes.md"
    assert h.ok("get_file_info", path=taxes)["access"] == {"read": True, "write": False, "execute": False}
    error = h.fails("write_file", "PERMISSION_DENIED", "PERMISSION_DENIED", path=taxes, content="changed")
    assert error["details"]["needs"] == "w"
    h.fails("append_to_file", "PERMISSION_DENIED", path=taxes, content="more")
    h.fails("edit_file", "PERMISSION_DENIED", path=taxes, old_text="Taxes", new_text="Tax")
    h.fails("truncate_file", "PERMISSION_DENIED", path=taxes, size=0)
    assert h.ok("change_mode", path=taxes, mode="644")["permissions"] == "-rw-r--r--"
    assert h.ok("write_file", path=taxes, content="changed\n")["size"] == 8


def test_system_files_and_other_homes_are_protected(h):
    me, colleague, guest = people(h)
    assert h.ok("read_file", path="/etc/hostname")["content"] == f"{me}-laptop\n"
    h.fails("write_file", "PERMISSION_DENIED", path="/etc/hostname", content="pwned\n")
    h.fails("create_file", "PERMISSION_DENIED", path="/etc/evil.conf", content="x")
    h.fails("read_file", "PERMISSION_DENIED", path="/etc/shadow")
    h.fails("delete_file", "PERMISSION_DENIED", path="/etc/motd")
    h.fails("move_to_trash", "PERMISSION_DENIED", path="/usr/local/bin/backup.sh")
    h.fails("change_mode", "OPERATION_NOT_PERMITTED", path="/etc/hostname", mode="666")
    h.fails("remove_directory", "OPERATION_NOT_PERMITTED", path="/", recursive=True)
    h.fails("move_to_trash", "OPERATION_NOT_PERMITTED", path="/")
    # The colleague's home (0751) can be passed through but not listed; private/ is closed.
    h.fails("list_directory", "PERMISSION_DENIED", path=f"~{colleague}")
    assert "Staging" in h.ok("read_file", path=f"~{colleague}/public/shared-notes.md")["content"]
    h.fails("write_file", "PERMISSION_DENIED", path=f"~{colleague}/public/shared-notes.md", content="x")
    error = h.fails("read_file", "PERMISSION_DENIED", path=f"~{colleague}/private/salary-review.md")
    assert error["details"]["needs"] == "x"
    h.fails("read_file", "PERMISSION_DENIED", path=f"/home/{guest}/notes.txt")
    assert h.ok("path_exists", path=f"/home/{guest}/notes.txt")["problem"] == "PERMISSION_DENIED"
    searched = h.ok("search_file_contents", directory="/home", text="password")
    assert searched["total"] == 0 and searched["unreadable_skipped"] >= 2


def test_group_permissions_and_the_sticky_tmp(h):
    _, colleague, _ = people(h)
    roadmap = h.ok("get_file_info", path="/srv/team/roadmap.md")
    assert (roadmap["owner"], roadmap["group"], roadmap["access"]["write"]) == (colleague, "staff", True)
    h.ok("append_to_file", path="/srv/team/roadmap.md", content="- Q3: trash for the file server\n")
    h.ok("create_file", path="/srv/team/retro.md", content="# Retro\n")
    h.fails("write_file", "PERMISSION_DENIED", path="/srv/team/on-call.txt", content="swap\n")
    theirs = next(e["path"] for e in h.ok("list_directory", path="/tmp")["entries"] if e["owner"] == colleague)
    error = h.fails("delete_file", "PERMISSION_DENIED", path=theirs)
    assert "sticky" in error["message"]
    h.fails("move_path", "PERMISSION_DENIED", source=theirs, destination="/tmp/mine.log")
    h.ok("delete_file", path="/tmp/scratch.txt")


def test_chmod_and_chown_rules(h):
    me, colleague, guest = people(h)
    h.ok("change_mode", path="~/notes/todo.md", mode="600")
    assert h.ok("get_file_info", path="~/notes/todo.md")["permissions"] == "-rw-------"
    h.fails("change_owner", "OPERATION_NOT_PERMITTED", path="/srv/team/roadmap.md", owner=me)
    h.fails("change_owner", "OPERATION_NOT_PERMITTED", path="~/notes/todo.md", owner=me, group="adm")
    h.fails("change_owner", "USER_NOT_FOUND", "NOT_FOUND", path="~/notes/todo.md", owner="mallory")
    h.fails("change_owner", "GROUP_NOT_FOUND", path="~/notes/todo.md", owner=me, group="wheel")
    assert h.ok("change_owner", path="~/notes/todo.md", owner=me, group="staff")["group"] == "staff"
    # Giving a file away moves its bytes to the new owner's quota; then it is theirs to manage.
    size = h.ok("get_file_info", path="~/Documents/resume.md")["size"]
    mine, theirs = used(h, me), used(h, guest)
    h.ok("change_owner", path="~/Documents/resume.md", owner=guest)
    assert (used(h, me), used(h, guest)) == (mine - size, theirs + size)
    h.fails("change_mode", "OPERATION_NOT_PERMITTED", path="~/Documents/resume.md", mode="600")
    h.fails("write_file", "PERMISSION_DENIED", path="~/Documents/resume.md", content="x")
    # chmod -R refuses a tree holding someone else's file, and changes nothing.
    h.ok("change_owner", path="~/Documents/budget-2026.csv", owner=colleague)
    h.fails("change_mode", "OPERATION_NOT_PERMITTED", path="~/Documents", mode="700", recursive=True)


# -- directories and files ------------------------------------------------------------------------


def test_directory_rules(h):
    h.fails("make_directory", "ALREADY_EXISTS", "CONFLICT", path="~/notes")
    h.fails("make_directory", "PATH_NOT_FOUND", "NOT_FOUND", path="~/a/b/c")
    h.fails("make_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md/sub", parents=True)
    h.fails("make_directory", "ALREADY_EXISTS", path="~/notes/todo.md", parents=True)
    made = h.ok("make_directory", path="~/a/b/c", parents=True, mode="700")
    assert [p.rsplit("/", 1)[1] for p in made["created"]] == ["a", "b", "c"]
    assert h.ok("make_directory", path="~/a/b/c", parents=True)["created"] == []
    assert h.ok("get_file_info", path="~/a/b/c")["mode"] == "0700"
    assert h.ok("get_file_info", path="~/a/b")["mode"] == "0755"
    h.ok("create_file", path="~/a/b/c/file.txt", content="hello\n")
    error = h.fails("remove_directory", "DIRECTORY_NOT_EMPTY", path="~/a")
    assert error["details"]["entries"] == 3
    h.fails("remove_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md")
    h.fails("remove_directory", "NOT_A_DIRECTORY", path="~/current-project")  # a symlink
    h.fails("delete_file", "IS_A_DIRECTORY", path="~/a")
    h.ok("change_directory", path="~/a/b")
    h.fails("remove_directory", "DIRECTORY_IN_USE", path="~/a", recursive=True)
    h.fails("move_to_trash", "DIRECTORY_IN_USE", path="~/a")
    h.fails("change_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md")
    h.ok("change_directory", path="~")
    removed = h.ok("remove_directory", path="~/a", recursive=True)
    assert (removed["removed_entries"], removed["freed_bytes"]) == (4, 6)
    assert not h.ok("path_exists", path="~/a")["exists"]


def test_read_write_and_edit_files(h):
    h.fails("create_file", "ALREADY_EXISTS", path="~/notes/todo.md")
    h.fails("create_file", "ALREADY_EXISTS", path="~/old-notes")  # a dangling symlink is still an entry
    h.fails("create_file", "PATH_NOT_FOUND", path="~/nowhere/x.md")
    h.fails("read_file", "IS_A_DIRECTORY", path="~/notes")
    h.fails("read_file", "NOT_A_DIRECTORY", path="~/notes/todo.md/x")
    h.fails("read_file", "PATH_NOT_FOUND", path="~/notes/nothing.md")
    photo = h.ok("find_files", directory="~/Pictures", name="*.jpg")["matches"][0]["path"]
    error = h.fails("read_file", "BINARY_FILE", path=photo)
    assert error["details"]["mime"] == "image/jpeg"
    h.fails("write_file", "PATH_NOT_FOUND", path="~/notes/new.md", content="x", create_if_missing=False)
    text = "".join(f"line {n}\n" for n in range(1, 26))
    assert h.ok("write_file", path="~/notes/lines.txt", content=text)["created"]
    pages, offset = [], 0
    while offset is not None:
        page = h.ok("read_file", path="~/notes/lines.txt", offset=offset, limit=7)
        pages.append(page["content"])
        offset = page["next_offset"]
    assert "".join(pages) == text and len(pages) == 4
    assert h.ok("head_file", path="~/notes/lines.txt", lines=2)["content"] == "line 1\nline 2\n"
    tail = h.ok("tail_file", path="~/notes/lines.txt", lines=2)
    assert (tail["content"], tail["start_line"], tail["total_lines"]) == ("line 24\nline 25\n", 24, 25)
    h.fails("edit_file", "TEXT_NOT_FOUND", path="~/notes/lines.txt", old_text="line 99", new_text="x")
    error = h.fails("edit_file", "AMBIGUOUS_MATCH", path="~/notes/lines.txt", old_text="line 2", new_text="x")
    assert error["details"]["occurrences"] == 7  # 2, 20-25
    edited = h.ok("edit_file", path="~/notes/lines.txt", old_text="line 25\n", new_text="the end\n")
    assert "-line 25" in edited["diff"] and "+the end" in edited["diff"]
    assert h.ok("edit_file", path="~/notes/lines.txt", old_text="line", new_text="row",
                replace_all=True)["replacements"] == 24
    assert h.ok("truncate_file", path="~/notes/lines.txt", size=6)["size"] == 6
    assert h.ok("read_file", path="~/notes/lines.txt")["content"] == "row 1\n"
    h.ok("write_file", path="~/notes/utf8.txt", content="naïve")  # 6 bytes; a cut never splits "ï"
    assert h.ok("truncate_file", path="~/notes/utf8.txt", size=3)["size"] == 2


def test_writes_through_symlinks_and_deleting_links(h):
    project = h.ok("read_symlink", path="~/current-project")["resolves_to"]
    h.ok("append_to_file", path="~/current-project/README.md", content="Linked edit.\n")
    assert h.ok("tail_file", path=f"{project}/README.md", lines=1)["content"] == "Linked edit.\n"
    assert h.ok("list_directory", path="~/current-project")["path"] == project
    h.fails("read_symlink", "NOT_A_SYMLINK", "INVALID_ARGUMENT", path="~/notes/todo.md")
    h.ok("delete_file", path="~/current-project")
    assert h.ok("path_exists", path=project)["exists"]
    h.fails("read_symlink", "PATH_NOT_FOUND", path="~/current-project")


def test_file_size_limit_and_quota(h):
    me, _, _ = people(h)
    h.fails("truncate_file", "FILE_TOO_LARGE", "RESOURCE_EXHAUSTED", path="~/notes/todo.md",
            size=MAX_TEXT_FILE_BYTES + 1)
    h.ok("create_file", path="~/big.txt")
    h.ok("truncate_file", path="~/big.txt", size=MAX_TEXT_FILE_BYTES)
    h.fails("append_to_file", "FILE_TOO_LARGE", path="~/big.txt", content="!")
    # Copying every photo would overflow the quota; details say by how much.
    before = used(h, me)
    error = h.fails("copy_path", "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", source="~/Pictures",
                    destination="~/Pictures-copy", recursive=True)
    assert error["details"]["used_bytes"] + error["details"]["needed_bytes"] > error["details"]["quota_bytes"]
    assert used(h, me) == before
    # Trash keeps counting until it is emptied; then there is room for one album.
    album = h.ok("list_directory", path="~/Pictures", sort="size")["entries"][0]["path"]
    trashed = h.ok("move_to_trash", path="~/Pictures")
    assert used(h, me) == before
    emptied = h.ok("empty_trash")
    assert emptied["freed_bytes"] >= trashed["size"] and used(h, me) == before - emptied["freed_bytes"]
    h.fails("restore_from_trash", "TRASH_ITEM_NOT_FOUND", trash_id=trashed["id"])
    assert not h.ok("path_exists", path=album)["exists"]
    assert recomputed_usage(h.state)[me] == used(h, me)


def test_usage_stays_consistent_after_many_operations(h):
    _, colleague, _ = people(h)
    for tool, args in (
        ("copy_path", {"source": "~/projects", "destination": "~/projects-copy", "recursive": True}),
        ("write_file", {"path": "~/notes/todo.md", "content": "short\n"}),
        ("append_to_file", {"path": "/srv/team/roadmap.md", "content": "more\n"}),
        ("create_archive", {"name": "all-notes", "paths": ["~/notes"]}),
        ("delete_file", {"path": "/srv/team/onboarding.md"}),
        ("remove_directory", {"path": "~/projects-copy", "recursive": True}),
        ("change_owner", {"path": "~/Downloads/lease-2026.pdf", "owner": colleague}),
        ("move_to_trash", {"path": "~/Documents"}),
        ("extract_archive", {"archive_id": None, "destination": "/tmp"}),
    ):
        if tool == "extract_archive":
            args["archive_id"] = h.ok("list_archives")["archives"][-1]["id"]
        h.ok(tool, **args)
    state = h.state
    assert recomputed_usage(state) == {u["id"]: u["used_bytes"] for u in state.users if u["used_bytes"]}


# -- moving and copying ---------------------------------------------------------------------------


def test_move_rules(h):
    me, _, _ = people(h)
    moved = h.ok("move_path", source="~/notes/ideas.md", destination="~/Documents")
    assert moved["destination"] == f"/home/{me}/Documents/ideas.md"
    h.fails("move_path", "PATH_NOT_FOUND", source="~/notes/ideas.md", destination="~/Documents")
    h.fails("move_path", "ALREADY_EXISTS", source="~/notes/todo.md", destination="~/Documents/ideas.md")
    h.fails("move_path", "SAME_PATH", source="~/notes/todo.md", destination="~/notes")
    h.fails("move_path", "DESTINATION_INSIDE_SOURCE", source="~/notes", destination="~/notes/meetings/old")
    replaced = h.ok("move_path", source="~/notes/todo.md", destination="~/Documents/ideas.md", overwrite=True)
    assert replaced["replaced"]
    assert h.ok("read_file", path="~/Documents/ideas.md")["content"].startswith("# TODO")
    # A directory moves with everything inside, and the working directory follows it.
    h.ok("change_directory", path="~/notes/meetings")
    h.ok("move_path", source="~/notes", destination="~/Documents/notes-2026")
    assert h.ok("get_current_user")["working_directory"] == f"/home/{me}/Documents/notes-2026/meetings"
    assert h.ok("count_words", paths=["../archive/2024-taxes.md"])["total"]["lines"] == 4


def test_overwriting_moves_check_the_kinds(h):
    h.ok("make_directory", path="~/stage/lonely.txt", parents=True)
    h.ok("make_directory", path="~/stage/full/inner", parents=True)
    h.ok("make_directory", path="~/stage/empty")
    h.ok("create_file", path="~/lonely.txt")
    h.ok("make_directory", path="~/full")
    h.ok("make_directory", path="~/empty")
    h.fails("move_path", "ALREADY_EXISTS", source="~/lonely.txt", destination="~/stage")
    h.fails("move_path", "IS_A_DIRECTORY", source="~/lonely.txt", destination="~/stage", overwrite=True)
    h.fails("move_path", "DIRECTORY_NOT_EMPTY", source="~/full", destination="~/stage", overwrite=True)
    h.fails("move_path", "NOT_A_DIRECTORY", source="~/full", destination="~/lonely.txt", overwrite=True)
    h.ok("change_directory", path="~/stage/empty")
    h.fails("move_path", "DIRECTORY_IN_USE", source="~/empty", destination="~/stage", overwrite=True)
    h.ok("change_directory", path="~")
    assert h.ok("move_path", source="~/empty", destination="~/stage", overwrite=True)["replaced"]
    h.fails("move_path", "OPERATION_NOT_PERMITTED", source="/", destination="~/root")


def test_copy_rules(h):
    me, _, _ = people(h)
    project = h.ok("read_symlink", path="~/current-project")["resolves_to"]
    h.fails("copy_path", "IS_A_DIRECTORY", source=project, destination="~/backup")
    h.fails("copy_path", "DESTINATION_INSIDE_SOURCE", source=project, destination=f"{project}/src/copy",
            recursive=True)
    h.fails("copy_path", "SAME_PATH", source="~/notes/todo.md", destination="~/notes/todo.md", overwrite=True)
    copied = h.ok("copy_path", source=project, destination="~/backup", recursive=True)
    originals = h.ok("find_files", directory=project, type="file", limit=100)["matches"]
    assert copied["entries_copied"] == 1 + h.ok("find_files", directory=project, limit=100)["total"]
    for entry in originals:
        twin = entry["path"].replace(project, f"/home/{me}/backup")
        assert h.ok("hash_file", path=twin)["sha256"] == h.ok("hash_file", path=entry["path"])["sha256"]
    again = h.ok("copy_path", source=project, destination="~/backup", recursive=True)  # cp -r nests
    assert again["destination"] == f"/home/{me}/backup/{project.rsplit('/', 1)[1]}"
    # Copies belong to the copier; a file copy over a file needs overwrite.
    assert h.ok("copy_path", source="/etc/hostname", destination="~")["destination"] == f"/home/{me}/hostname"
    assert h.ok("get_file_info", path="~/hostname")["owner"] == me
    h.fails("copy_path", "ALREADY_EXISTS", source="/etc/motd", destination="~/hostname")
    h.ok("copy_path", source="/etc/motd", destination="~/hostname", overwrite=True)
    assert "Backups" in h.ok("read_file", path="~/hostname")["content"]
    h.fails("copy_path", "PERMISSION_DENIED", source="/etc/shadow", destination="~")
    h.fails("copy_path", "PERMISSION_DENIED", source="~/notes/todo.md", destination="/etc")


# -- search and text tools ------------------------------------------------------------------------


def test_find_and_search(h):
    py = h.ok("find_files", directory="~/projects", name="*.py", limit=100)
    assert py["total"] >= 4 and all(m["path"].endswith(".py") for m in py["matches"])
    dirs = h.ok("find_files", directory="~", type="directory", max_depth=1, limit=100)["matches"]
    assert {m["path"].rsplit("/", 1)[1] for m in dirs} >= {"notes", "projects", "Pictures", ".ssh"}
    big = h.ok("find_files", directory="~", min_size=1_000_000, limit=100)["matches"]
    assert big and all(m["size"] >= 1_000_000 and m["type"] == "file" for m in big)
    assert h.ok("find_files", directory="~/notes", name="TODO.MD", ignore_case=True)["total"] == 1
    todos = h.ok("search_file_contents", directory="~", text="TODO", limit=100)
    assert todos["total"] >= 5
    assert all("TODO" in f["first_match"]["line"] for f in todos["files"])
    page = h.ok("search_file_contents", directory="~", text="todo", ignore_case=True, limit=2)
    assert page["next_offset"] == 2 and page["total"] >= todos["total"]
    h.fails("find_files", "NOT_A_DIRECTORY", directory="~/notes/todo.md")
    h.fails("search_file_contents", "PERMISSION_DENIED", directory="/root", text="x")


def test_grep_diff_hash_and_counts(h):
    grep = h.ok("grep_file", path="/etc/passwd", pattern="/home/", context=1)
    assert grep["match_count"] == 3 and grep["matches"][0]["before"] == ["root:x:0:0:System Administrator:/root:"
                                                                          "/bin/bash"]
    unchecked = h.ok("grep_file", path="~/notes/todo.md", pattern="- [x]", invert=True)
    assert all("[x]" not in m["line"] for m in unchecked["matches"])
    h.ok("copy_path", source="~/notes/todo.md", destination="~/todo-copy.md")
    same = h.ok("diff_files", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    assert same["identical"] and same["diff"] == ""
    assert h.ok("hash_file", path="~/todo-copy.md")["sha256"] == h.ok("hash_file",
                                                                      path="~/notes/todo.md")["sha256"]
    h.ok("append_to_file", path="~/todo-copy.md", content="- [ ] Water the ferns\n")
    diff = h.ok("diff_files", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    assert (diff["identical"], diff["lines_added"], diff["lines_removed"]) == (False, 1, 0)
    assert "+- [ ] Water the ferns" in diff["diff"]
    digest = h.ok("hash_file", path="~/todo-copy.md")["sha256"]
    assert h.ok("hash_file", path="~/todo-copy.md", expected=digest.upper())["matches"] is True
    h.fails("hash_file", "IS_A_DIRECTORY", path="~/notes")
    h.ok("truncate_file", path="~/todo-copy.md", size=300_000)
    h.fails("diff_files", "FILE_TOO_LARGE", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    photo = h.ok("find_files", directory="~/Pictures", name="*.jpg")["matches"][0]["path"]
    h.fails("diff_files", "BINARY_FILE", path_a=photo, path_b="~/notes/todo.md")
    h.fails("count_words", "BINARY_FILE", paths=["~/notes/todo.md", photo])
    counts = h.ok("count_words", paths=["/etc/hostname", "/etc/timezone"])
    assert counts["total"] == {"lines": 2, "words": 2, "characters": counts["total"]["bytes"],
                               "bytes": sum(f["bytes"] for f in counts["files"])}


# -- archives and trash ---------------------------------------------------------------------------


def test_archive_round_trip(h):
    me, _, _ = people(h)
    before = used(h, me)
    archive = h.ok("create_archive", name="notes-snapshot", paths=["~/notes", "~/.bashrc"])
    assert used(h, me) == before + archive["size"] and archive["size"] < archive["total_bytes"]
    assert archive["id"] in {a["id"] for a in h.ok("list_archives")["archives"]}
    entries = h.ok("list_archive_entries", archive_id=archive["id"], limit=100)["entries"]
    assert {"notes/todo.md", "notes/meetings", ".bashrc"} <= {e["path"] for e in entries}
    h.fails("create_archive", "ALREADY_EXISTS", "CONFLICT", name="notes-snapshot", paths=["~/notes"])
    h.fails("create_archive", "DUPLICATE_ENTRY", name="other", paths=["~/notes", "~/notes"])
    h.fails("create_archive", "PERMISSION_DENIED", name="secrets", paths=["/etc"])
    h.ok("make_directory", path="~/restore")
    extracted = h.ok("extract_archive", archive_id=archive["id"], destination="~/restore")
    assert extracted["created"] == len(entries)
    for original in ("~/notes/todo.md", "~/.bashrc"):
        copy = "~/restore/" + original.removeprefix("~/")
        assert h.ok("hash_file", path=copy)["sha256"] == h.ok("hash_file", path=original)["sha256"]
    h.ok("write_file", path="~/restore/notes/todo.md", content="local change\n")
    h.fails("extract_archive", "ALREADY_EXISTS", archive_id=archive["id"], destination="~/restore")
    # The extracted read-only tax note refuses to be overwritten until its mode allows it.
    error = h.fails("extract_archive", "PERMISSION_DENIED", archive_id=archive["id"], destination="~/restore",
                    overwrite=True)
    assert error["details"]["path"].endswith("/restore/notes/archive/2024-taxes.md")
    h.ok("change_mode", path="~/restore/notes/archive/2024-taxes.md", mode="644")
    again = h.ok("extract_archive", archive_id=archive["id"], destination="~/restore", overwrite=True)
    assert (again["created"], again["replaced"]) == (0, 2)  # todo.md's text and the tax note's mode
    assert h.ok("get_file_info", path="~/restore/notes/archive/2024-taxes.md")["mode"] == "0444"
    assert h.ok("read_file", path="~/restore/notes/todo.md")["content"].startswith("# TODO")
    h.fails("extract_archive", "PERMISSION_DENIED", archive_id=archive["id"], destination="/etc")
    h.fails("list_archive_entries", "ARCHIVE_NOT_FOUND", "NOT_FOUND", archive_id="arc_missing")


def test_archives_are_capped_in_entries(h, monkeypatch):
    # the limit as the tool's own module sees it (wherever the server keeps its tools)
    monkeypatch.setitem(TOOLS["create_archive"].fn.__globals__, "MAX_ARCHIVE_ENTRIES", 5)
    error = h.fails("create_archive", "TOO_MANY_ENTRIES", "RESOURCE_EXHAUSTED", name="everything", paths=["~/notes"])
    assert error["details"]["limit"] == 5
    h.ok("create_archive", name="small", paths=["~/notes/todo.md", "~/.bashrc"])


def test_archives_of_other_users_and_hostile_entries(h):
    _, colleague, _ = people(h)
    state = h.state
    theirs = state.archives.first(owner=colleague)["id"]
    h.fails("list_archive_entries", "PERMISSION_DENIED", archive_id=theirs)
    h.fails("extract_archive", "PERMISSION_DENIED", archive_id=theirs)
    # Arrange: archive records no tool would write; extraction still refuses to leave the destination.
    mine = state.archives.first(owner=state.get_var("user"))
    base = {"mode": 0o644, "size": 1, "content": "x", "binary": False, "mime": "text/plain", "sha256": None,
            "target": None, "meta": None}
    slip = state.archives.insert({**mine, "id": "arc_slip", "entries": [{**base, "kind": "file", "path": "../../x"}]})
    link = state.archives.insert({**mine, "id": "arc_link", "entries": [
        {**base, "kind": "symlink", "path": "escape", "target": "../../../../../../../etc", "content": None}]})
    for archive in (slip, link):
        h.fails("extract_archive", "PATH_OUTSIDE_ROOT", archive_id=archive["id"], destination="~")


def test_trash_round_trip(h):
    me, colleague, _ = people(h)
    item = h.ok("move_to_trash", path="~/notes/meetings")
    assert item["type"] == "directory" and item["item_count"] > 1
    assert not h.ok("path_exists", path="~/notes/meetings")["exists"]
    assert h.ok("list_trash")["items"][0]["id"] == item["id"]
    assert h.ok("search_file_contents", directory="~/notes", text="Standup")["total"] == 0
    h.ok("make_directory", path="~/notes/meetings")
    h.fails("restore_from_trash", "ALREADY_EXISTS", trash_id=item["id"])
    restored = h.ok("restore_from_trash", trash_id=item["id"], destination="~/notes/old-meetings")
    assert restored["restored_path"] == f"/home/{me}/notes/old-meetings"
    assert h.ok("search_file_contents", directory="~/notes", text="Standup")["total"] == item["item_count"] - 1
    h.fails("restore_from_trash", "TRASH_ITEM_NOT_FOUND", trash_id=item["id"])
    # The seeded trashed draft cannot go back once its directory is gone.
    draft = h.ok("list_trash")["items"][0]
    h.ok("move_to_trash", path="~/Documents")
    h.fails("restore_from_trash", "PATH_NOT_FOUND", trash_id=draft["id"])
    theirs = h.state.trash.first(owner=colleague)["id"]
    h.fails("restore_from_trash", "PERMISSION_DENIED", trash_id=theirs)
    h.fails("empty_trash", "PERMISSION_DENIED", trash_id=theirs)
    h.fails("empty_trash", "TRASH_ITEM_NOT_FOUND", trash_id="trs_missing")
    assert h.ok("empty_trash", trash_id=draft["id"])["deleted_items"] == 1
    assert h.ok("list_trash")["total"] == 1


def test_ids_flow_from_one_tool_to_the_next(h):
    """Listing finds a project, an archive of it is made, its id lists and extracts it; a trash id
    restores what was trashed."""
    project = h.ok("list_directory", path="~/projects")["entries"][0]
    files = h.ok("find_files", directory=project["path"], type="file")["total"]
    archive = h.ok("create_archive", name=f"{project['name']}-v1", paths=[project["path"]])
    first_entry = h.ok("list_archive_entries", archive_id=archive["id"], limit=1)["entries"][0]
    assert first_entry["path"] == project["name"] and first_entry["type"] == "directory"
    trashed = h.ok("move_to_trash", path=project["path"])
    assert not h.ok("path_exists", path=project["path"])["exists"]
    out = h.ok("extract_archive", archive_id=archive["id"], destination="~/projects")
    assert out["created"] == archive["entry_count"]
    h.fails("restore_from_trash", "ALREADY_EXISTS", trash_id=trashed["id"])
    h.ok("remove_directory", path=project["path"], recursive=True)
    assert h.ok("restore_from_trash", trash_id=trashed["id"])["restored_path"] == project["path"]
    assert h.ok("find_files", directory=project["path"], type="file")["total"] == files >= 5


def test_tree_and_disk_usage(h):
    tree = h.ok("get_tree", path="~", max_depth=1)
    assert "├── notes/" in tree["tree"] and ".bashrc" not in tree["tree"]
    assert "current-project -> projects/" in tree["tree"]
    assert h.ok("get_tree", path="/", max_depth=8, max_entries=10)["truncated"]
    assert "[permission denied]" in h.ok("get_tree", path="/home")["tree"]
    du = h.ok("get_disk_usage", path="~")
    assert du["largest"][0]["path"].endswith("/Pictures") and du["quota"]["quota_bytes"] > du["quota"]["used_bytes"]
    pictures = h.ok("get_disk_usage", path="~/Pictures")["total_bytes"]
    assert pictures == sum(m["size"] for m in h.ok("find_files", directory="~/Pictures", type="file",
                                                   limit=100)["matches"])
    listing = h.ok("list_directory", path="~", show_hidden=True, sort="size", limit=3)
    assert listing["total"] > 3 and listing["next_offset"] == 3
    assert {e["name"] for e in h.ok("list_directory", path="~", show_hidden=True)["entries"]} >= {".ssh"}
