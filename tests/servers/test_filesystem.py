"""The filesystem server: its tools, seed, path safety, permissions, quotas and typed failures.

Every failure test checks the reason and code, that the tool declares the reason, and that the
state is unchanged — by the tool itself (it checks before it writes), not only by the executor's
rollback.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
from typing import Any

import pluggy
import pytest

from prove_core.plugin import hookspecs
from prove_core.env.runtime import ServerRuntime
from prove_core.toolkit import Collection, State, ToolError
from prove_servers import filesystem
from prove_servers.filesystem import MAX_SYMLINK_HOPS, MAX_TEXT_FILE_BYTES, FsOptions, server

TOOLS = server.tools
NAMES = {
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
ALL_EXAMPLES = [(name, i) for name, tool in TOOLS.items() for i in range(len(tool.examples))]


@pytest.fixture(scope="module")
def rt() -> ServerRuntime:
    return ServerRuntime(server)


@pytest.fixture
def sid(rt: ServerRuntime) -> str:
    return rt.new_session()


def ok(rt: ServerRuntime, sid: str, tool: str, **args: Any) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, result.error
    return result.data


def fails(rt: ServerRuntime, sid: str, tool: str, reason: str, code: str | None = None, **args: Any) -> dict:
    before = rt.state_hash(sid)
    probe = State.from_snapshot(rt.state(sid).snapshot())
    with pytest.raises(ToolError):
        TOOLS[tool].fn(probe, **TOOLS[tool].validate(dict(args)))
    assert probe.state_hash() == before, f"{tool} wrote before failing with {reason}"
    result = rt.call(sid, tool, args)
    assert result.is_error, f"{tool} should fail with {reason}, returned {result.data}"
    assert result.error["reason"] == reason, result.error
    if code is not None:
        assert result.code == code, result.error
    assert reason in TOOLS[tool].spec.errors, f"{tool} does not declare {reason}"
    assert rt.state_hash(sid) == before, f"{tool} changed state although it failed"
    return result.error


def example_args(rt: ServerRuntime, sid: str, example: Any) -> dict:
    return dict(example(rt.state(sid)) if callable(example) else example)


def people(rt: ServerRuntime, sid: str) -> tuple[str, str, str]:
    """(me, colleague, guest): the signed-in user, a staff colleague, a user in no shared group."""
    state = rt.state(sid)
    me = state.get_var("user")
    colleague = next(m for m in state.groups.get("staff")["members"] if m != me)
    guest = next(m for m in state.groups.get("users")["members"] if m not in (me, colleague))
    return me, colleague, guest


def used(rt: ServerRuntime, sid: str, user: str) -> int:
    return rt.state(sid).users.get(user)["used_bytes"]


def recomputed_usage(state: State) -> dict[str, int]:
    totals: dict[str, int] = {}
    for node in state.nodes.all():
        if node["kind"] == "file":
            totals[node["owner"]] = totals.get(node["owner"], 0) + node["size"]
    for archive in state.archives.all():
        totals[archive["owner"]] = totals.get(archive["owner"], 0) + archive["size"]
    return totals


# -- tool surface ---------------------------------------------------------------------------------


def test_exactly_40_tools_with_the_planned_names():
    assert len(TOOLS) == 40
    assert set(TOOLS) == NAMES
    assert (server.name, server.domain) == ("filesystem", "productivity")


def test_every_parameter_is_described_and_every_tool_has_an_example():
    for name, tool in TOOLS.items():
        assert tool.spec.description and tool.examples, name
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


def test_annotations_and_entity_metadata():
    read_only = {n for n, t in TOOLS.items() if t.spec.annotations.read_only}
    assert read_only == {
        "get_current_user", "list_users", "list_directory", "get_tree", "get_disk_usage", "read_file",
        "get_file_info", "path_exists", "read_symlink", "find_files", "search_file_contents", "grep_file",
        "diff_files", "hash_file", "count_words", "head_file", "tail_file", "list_archives",
        "list_archive_entries", "list_trash",
    }
    destructive = {n for n, t in TOOLS.items() if t.spec.annotations.destructive}
    assert destructive == {"remove_directory", "write_file", "edit_file", "truncate_file", "delete_file",
                           "move_path", "copy_path", "extract_archive", "empty_trash"}
    not_idempotent = {n for n, t in TOOLS.items() if not t.spec.annotations.idempotent}
    assert not_idempotent == {"append_to_file", "edit_file", "touch_file", "copy_path"}
    for name, tool in TOOLS.items():
        if tool.spec.annotations.read_only:
            assert not tool.spec.produces and not tool.spec.mutates, name
        else:
            assert tool.spec.produces or tool.spec.mutates, name
    assert TOOLS["create_archive"].spec.produces == ("archive",)
    assert TOOLS["move_to_trash"].spec.produces == ("trash_item",)
    assert TOOLS["extract_archive"].spec.entity_params() == {"archive_id": "archive", "destination": "directory"}
    assert TOOLS["restore_from_trash"].spec.entity_params() == {"trash_id": "trash_item"}
    assert TOOLS["read_file"].spec.entity_params() == {"path": "file"}


@pytest.mark.parametrize(("tool", "index"), ALL_EXAMPLES)
def test_every_example_succeeds_and_only_writers_change_state(rt, tool, index):
    sid = rt.new_session()
    args = example_args(rt, sid, TOOLS[tool].examples[index])
    before = rt.state_hash(sid)
    data = ok(rt, sid, tool, **args)
    assert json.loads(json.dumps(data)) == data  # JSON-native values only
    assert (rt.state_hash(sid) != before) != TOOLS[tool].spec.annotations.read_only


def test_idempotent_writers_have_no_further_effect_when_repeated(rt):
    for name, tool in TOOLS.items():
        if tool.spec.annotations.read_only or not tool.spec.annotations.idempotent:
            continue
        for example in tool.examples:
            sid = rt.new_session()
            args = example_args(rt, sid, example)
            ok(rt, sid, name, **args)
            once = rt.state_hash(sid)
            rt.call(sid, name, args)  # may be refused (already exists, gone, ...) but changes nothing
            assert rt.state_hash(sid) == once, name


def test_no_tool_touches_the_real_disk(rt, monkeypatch):
    with open(filesystem.__file__) as handle:  # read before the guard goes up
        tree = ast.parse(handle.read())
    imported, called = set(), set()
    for node in ast.walk(tree):
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
    for name, index in ALL_EXAMPLES:
        sid = rt.new_session()
        ok(rt, sid, name, **example_args(rt, sid, TOOLS[name].examples[index]))
    sid = rt.new_session()
    fails(rt, sid, "read_file", "PATH_NOT_FOUND", path="/etc/does-not-exist")


def test_tools_look_nodes_up_through_indexes_not_scans(rt, monkeypatch):
    """Resolving, listing and writing use the parent_id / dirent indexes; no call walks the table."""
    rt.seed_snapshot()  # seeding may scan; the tools may not
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
    for name, index in ALL_EXAMPLES:
        sid = rt.new_session()
        ok(rt, sid, name, **example_args(rt, sid, TOOLS[name].examples[index]))
    assert not node_scans and not unindexed


# -- seed -----------------------------------------------------------------------------------------


def test_same_seed_same_state_and_other_seed_differs():
    a, b, other = ServerRuntime(server), ServerRuntime(server), ServerRuntime(server, seed=1)
    assert a.state_hash(a.new_session()) == b.state_hash(b.new_session())
    assert other.state_hash(other.new_session()) != a.state_hash(a.new_session())
    ids = {n["id"] for n in a.state(a.new_session()).nodes}
    assert ids.isdisjoint(n["id"] for n in other.state(other.new_session()).nodes)


def test_seed_has_the_variety_tasks_need(rt, sid):
    state = rt.state(sid)
    me, colleague, guest = people(rt, sid)
    assert state.users.get("root")["quota_bytes"] is None
    kinds = {n["kind"] for n in state.nodes}
    assert kinds == {"file", "directory", "symlink"}
    assert len(ok(rt, sid, "list_directory", path="~/projects")["entries"]) == 4
    photos = ok(rt, sid, "find_files", directory="~/Pictures", name="*.jpg", limit=100)
    assert photos["total"] >= 8
    info = ok(rt, sid, "get_file_info", path=photos["matches"][0]["path"])
    assert info["binary"] and info["mime"] == "image/jpeg" and {"camera", "taken_at", "width"} <= set(info["photo"])
    assert ok(rt, sid, "read_symlink", path="~/old-notes")["dangling"]
    assert ok(rt, sid, "get_file_info", path="~/notes/archive/2024-taxes.md")["mode"] == "0444"
    assert ok(rt, sid, "get_file_info", path="/tmp")["permissions"] == "drwxrwxrwt"
    assert ok(rt, sid, "list_trash")["total"] == 1 and ok(rt, sid, "list_archives")["total"] == 1
    assert state.trash.first(owner=colleague) and state.archives.first(owner=colleague)
    for user in (me, colleague, guest):
        record = state.users.get(user)
        assert 0 < record["used_bytes"] < record["quota_bytes"]
    assert recomputed_usage(state) == {u["id"]: u["used_bytes"] for u in state.users if u["used_bytes"]}
    assert ok(rt, sid, "get_current_user")["working_directory"] == f"/home/{me}"


def test_a_ten_times_larger_seed_works():
    big = ServerRuntime(server, options=FsOptions(projects=40))
    small = ServerRuntime(server)
    assert len(big.state(big.new_session()).nodes) > 4 * len(small.state(small.new_session()).nodes)
    sid = big.new_session()
    assert ok(big, sid, "list_directory", path="~/projects", limit=100)["total"] == 40
    for name, index in ALL_EXAMPLES:
        sid = big.new_session()
        ok(big, sid, name, **example_args(big, sid, TOOLS[name].examples[index]))


def test_options_are_validated():
    with pytest.raises(ValueError):
        FsOptions(projects=0)


def test_registers_through_the_plugin_hook():
    pm = pluggy.PluginManager("prove")
    pm.add_hookspecs(hookspecs)
    pm.register(filesystem)
    registered: list = []
    pm.hook.prove_register_servers(register=registered.append)
    assert registered == [server]


# -- path safety ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/..", "/../etc/passwd", "~/../../../etc", "../../../..", "/home/../../tmp",
                                  "C:\\Windows\\system.ini", "c:/Users", "\\\\fileserver\\share\\x",
                                  "file:///etc/passwd", "s3://bucket/key"])
def test_paths_that_escape_the_root_are_refused(rt, sid, path):
    error = fails(rt, sid, "read_file", "PATH_OUTSIDE_ROOT", path=path)
    assert error["code"] == "PERMISSION_DENIED"
    fails(rt, sid, "write_file", "PATH_OUTSIDE_ROOT", path=path, content="x")
    fails(rt, sid, "path_exists", "PATH_OUTSIDE_ROOT", path=path)


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
def test_malformed_paths_are_invalid(rt, sid, path, why):
    error = fails(rt, sid, "read_file", "INVALID_PATH", path=path)
    assert error["code"] == "INVALID_ARGUMENT" and why in error["message"]
    fails(rt, sid, "create_file", "INVALID_PATH", path=path)
    fails(rt, sid, "path_exists", "INVALID_PATH", path=path)


def test_dot_dot_inside_the_tree_is_normalized(rt, sid):
    me, _, _ = people(rt, sid)
    assert ok(rt, sid, "read_file", path="/home/../etc/./hostname")["path"] == "/etc/hostname"
    assert ok(rt, sid, "read_file", path="~/projects/../notes//todo.md")["path"] == f"/home/{me}/notes/todo.md"
    ok(rt, sid, "change_directory", path="~/notes/meetings")
    assert ok(rt, sid, "read_file", path="../todo.md")["path"] == f"/home/{me}/notes/todo.md"
    assert ok(rt, sid, "path_exists", path="../../../../etc/motd")["exists"]
    fails(rt, sid, "read_file", "PATH_OUTSIDE_ROOT", path="../../../../../etc/motd")


def test_symlinks_may_not_point_outside_the_tree(rt, sid):
    fails(rt, sid, "create_symlink", "PATH_OUTSIDE_ROOT", path="~/escape", target="../../../../etc")
    fails(rt, sid, "create_symlink", "PATH_OUTSIDE_ROOT", path="~/escape", target="C:\\Windows")
    fails(rt, sid, "create_symlink", "INVALID_PATH", path="~/escape", target="notes/\x00")
    fails(rt, sid, "create_symlink", "INVALID_PATH", path="~/escape", target="~/notes")
    # A link whose relative target was inside where it was made escapes once moved higher up.
    ok(rt, sid, "make_directory", path="~/deep/er", parents=True)
    made = ok(rt, sid, "create_symlink", path="~/deep/er/up", target="../../../../etc")
    assert made["resolves_to"] == "/etc"
    ok(rt, sid, "move_path", source="~/deep/er/up", destination="~/up")
    assert ok(rt, sid, "read_symlink", path="~/up")["problem"] == "PATH_OUTSIDE_ROOT"
    fails(rt, sid, "read_file", "PATH_OUTSIDE_ROOT", path="~/up/hostname")
    fails(rt, sid, "path_exists", "PATH_OUTSIDE_ROOT", path="~/up/hostname")


def test_symlink_loops_and_long_chains_are_bounded(rt, sid):
    ok(rt, sid, "create_symlink", path="~/a", target="b")
    ok(rt, sid, "create_symlink", path="~/b", target="a")
    made = ok(rt, sid, "create_symlink", path="~/self", target="self/x")
    assert made["problem"] == "SYMLINK_LOOP"
    error = fails(rt, sid, "read_file", "SYMLINK_LOOP", path="~/a")
    assert error["code"] == "FAILED_PRECONDITION"
    fails(rt, sid, "list_directory", "SYMLINK_LOOP", path="~/self")
    assert ok(rt, sid, "path_exists", path="~/a") == {"path": "~/a", "exists": False, "type": None,
                                                      "problem": "SYMLINK_LOOP"}
    assert ok(rt, sid, "path_exists", path="~/a", follow_symlinks=False)["type"] == "symlink"
    assert ok(rt, sid, "read_symlink", path="~/a")["problem"] == "SYMLINK_LOOP"
    ok(rt, sid, "delete_file", path="~/a")  # a loop can still be removed
    # A chain of exactly MAX_SYMLINK_HOPS links resolves; one more is refused.
    for n in range(MAX_SYMLINK_HOPS + 1):
        ok(rt, sid, "create_symlink", path=f"~/link{n}", target=f"link{n + 1}" if n < MAX_SYMLINK_HOPS else
           "notes/todo.md")
    assert ok(rt, sid, "read_file", path="~/link1")["total_lines"] > 0
    fails(rt, sid, "read_file", "SYMLINK_LOOP", path="~/link0")


# -- permissions ----------------------------------------------------------------------------------


def test_a_read_only_file_refuses_writes_until_its_mode_changes(rt, sid):
    taxes = "~/notes/archive/2024-taxes.md"
    assert ok(rt, sid, "get_file_info", path=taxes)["access"] == {"read": True, "write": False, "execute": False}
    error = fails(rt, sid, "write_file", "PERMISSION_DENIED", path=taxes, content="changed")
    assert error["code"] == "PERMISSION_DENIED" and error["details"]["needs"] == "w"
    fails(rt, sid, "append_to_file", "PERMISSION_DENIED", path=taxes, content="more")
    fails(rt, sid, "edit_file", "PERMISSION_DENIED", path=taxes, old_text="Taxes", new_text="Tax")
    fails(rt, sid, "truncate_file", "PERMISSION_DENIED", path=taxes, size=0)
    assert ok(rt, sid, "change_mode", path=taxes, mode="644")["permissions"] == "-rw-r--r--"
    assert ok(rt, sid, "write_file", path=taxes, content="changed\n")["size"] == 8


def test_system_files_and_other_homes_are_protected(rt, sid):
    me, colleague, guest = people(rt, sid)
    assert ok(rt, sid, "read_file", path="/etc/hostname")["content"] == f"{me}-laptop\n"
    fails(rt, sid, "write_file", "PERMISSION_DENIED", path="/etc/hostname", content="pwned\n")
    fails(rt, sid, "create_file", "PERMISSION_DENIED", path="/etc/evil.conf", content="x")
    fails(rt, sid, "read_file", "PERMISSION_DENIED", path="/etc/shadow")
    fails(rt, sid, "delete_file", "PERMISSION_DENIED", path="/etc/motd")
    fails(rt, sid, "move_to_trash", "PERMISSION_DENIED", path="/usr/local/bin/backup.sh")
    fails(rt, sid, "change_mode", "OPERATION_NOT_PERMITTED", path="/etc/hostname", mode="666")
    fails(rt, sid, "remove_directory", "OPERATION_NOT_PERMITTED", path="/", recursive=True)
    fails(rt, sid, "move_to_trash", "OPERATION_NOT_PERMITTED", path="/")
    # The colleague's home (0751) can be passed through but not listed; private/ is closed.
    fails(rt, sid, "list_directory", "PERMISSION_DENIED", path=f"~{colleague}")
    assert "Staging" in ok(rt, sid, "read_file", path=f"~{colleague}/public/shared-notes.md")["content"]
    fails(rt, sid, "write_file", "PERMISSION_DENIED", path=f"~{colleague}/public/shared-notes.md", content="x")
    error = fails(rt, sid, "read_file", "PERMISSION_DENIED", path=f"~{colleague}/private/salary-review.md")
    assert error["details"]["needs"] == "x"
    fails(rt, sid, "read_file", "PERMISSION_DENIED", path=f"/home/{guest}/notes.txt")
    assert ok(rt, sid, "path_exists", path=f"/home/{guest}/notes.txt")["problem"] == "PERMISSION_DENIED"
    searched = ok(rt, sid, "search_file_contents", directory="/home", text="password")
    assert searched["total"] == 0 and searched["unreadable_skipped"] >= 2


def test_group_permissions_and_the_sticky_tmp(rt, sid):
    _, colleague, _ = people(rt, sid)
    roadmap = ok(rt, sid, "get_file_info", path="/srv/team/roadmap.md")
    assert (roadmap["owner"], roadmap["group"], roadmap["access"]["write"]) == (colleague, "staff", True)
    ok(rt, sid, "append_to_file", path="/srv/team/roadmap.md", content="- Q3: trash for the file server\n")
    ok(rt, sid, "create_file", path="/srv/team/retro.md", content="# Retro\n")
    fails(rt, sid, "write_file", "PERMISSION_DENIED", path="/srv/team/on-call.txt", content="swap\n")
    theirs = next(e["path"] for e in ok(rt, sid, "list_directory", path="/tmp")["entries"] if e["owner"] == colleague)
    error = fails(rt, sid, "delete_file", "PERMISSION_DENIED", path=theirs)
    assert "sticky" in error["message"]
    fails(rt, sid, "move_path", "PERMISSION_DENIED", source=theirs, destination="/tmp/mine.log")
    ok(rt, sid, "delete_file", path="/tmp/scratch.txt")


def test_chmod_and_chown_rules(rt, sid):
    me, colleague, guest = people(rt, sid)
    ok(rt, sid, "change_mode", path="~/notes/todo.md", mode="600")
    assert ok(rt, sid, "get_file_info", path="~/notes/todo.md")["permissions"] == "-rw-------"
    fails(rt, sid, "change_owner", "OPERATION_NOT_PERMITTED", path="/srv/team/roadmap.md", owner=me)
    fails(rt, sid, "change_owner", "OPERATION_NOT_PERMITTED", path="~/notes/todo.md", owner=me, group="adm")
    error = fails(rt, sid, "change_owner", "USER_NOT_FOUND", path="~/notes/todo.md", owner="mallory")
    assert error["code"] == "NOT_FOUND"
    fails(rt, sid, "change_owner", "GROUP_NOT_FOUND", path="~/notes/todo.md", owner=me, group="wheel")
    assert ok(rt, sid, "change_owner", path="~/notes/todo.md", owner=me, group="staff")["group"] == "staff"
    # Giving a file away moves its bytes to the new owner's quota; then it is theirs to manage.
    size = ok(rt, sid, "get_file_info", path="~/Documents/resume.md")["size"]
    mine, theirs = used(rt, sid, me), used(rt, sid, guest)
    ok(rt, sid, "change_owner", path="~/Documents/resume.md", owner=guest)
    assert (used(rt, sid, me), used(rt, sid, guest)) == (mine - size, theirs + size)
    fails(rt, sid, "change_mode", "OPERATION_NOT_PERMITTED", path="~/Documents/resume.md", mode="600")
    fails(rt, sid, "write_file", "PERMISSION_DENIED", path="~/Documents/resume.md", content="x")
    # chmod -R refuses a tree holding someone else's file, and changes nothing.
    ok(rt, sid, "change_owner", path="~/Documents/budget-2026.csv", owner=colleague)
    fails(rt, sid, "change_mode", "OPERATION_NOT_PERMITTED", path="~/Documents", mode="700", recursive=True)


# -- directories and files ------------------------------------------------------------------------


def test_directory_rules(rt, sid):
    fails(rt, sid, "make_directory", "ALREADY_EXISTS", path="~/notes", code="CONFLICT")
    fails(rt, sid, "make_directory", "PATH_NOT_FOUND", path="~/a/b/c", code="NOT_FOUND")
    fails(rt, sid, "make_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md/sub", parents=True)
    fails(rt, sid, "make_directory", "ALREADY_EXISTS", path="~/notes/todo.md", parents=True)
    made = ok(rt, sid, "make_directory", path="~/a/b/c", parents=True, mode="700")
    assert [p.rsplit("/", 1)[1] for p in made["created"]] == ["a", "b", "c"]
    assert ok(rt, sid, "make_directory", path="~/a/b/c", parents=True)["created"] == []
    assert ok(rt, sid, "get_file_info", path="~/a/b/c")["mode"] == "0700"
    assert ok(rt, sid, "get_file_info", path="~/a/b")["mode"] == "0755"
    ok(rt, sid, "create_file", path="~/a/b/c/file.txt", content="hello\n")
    error = fails(rt, sid, "remove_directory", "DIRECTORY_NOT_EMPTY", path="~/a")
    assert error["details"]["entries"] == 3
    fails(rt, sid, "remove_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md")
    fails(rt, sid, "remove_directory", "NOT_A_DIRECTORY", path="~/current-project")  # a symlink
    fails(rt, sid, "delete_file", "IS_A_DIRECTORY", path="~/a")
    ok(rt, sid, "change_directory", path="~/a/b")
    fails(rt, sid, "remove_directory", "DIRECTORY_IN_USE", path="~/a", recursive=True)
    fails(rt, sid, "move_to_trash", "DIRECTORY_IN_USE", path="~/a")
    fails(rt, sid, "change_directory", "NOT_A_DIRECTORY", path="~/notes/todo.md")
    ok(rt, sid, "change_directory", path="~")
    removed = ok(rt, sid, "remove_directory", path="~/a", recursive=True)
    assert (removed["removed_entries"], removed["freed_bytes"]) == (4, 6)
    assert not ok(rt, sid, "path_exists", path="~/a")["exists"]


def test_read_write_and_edit_files(rt, sid):
    fails(rt, sid, "create_file", "ALREADY_EXISTS", path="~/notes/todo.md")
    fails(rt, sid, "create_file", "ALREADY_EXISTS", path="~/old-notes")  # a dangling symlink is still an entry
    fails(rt, sid, "create_file", "PATH_NOT_FOUND", path="~/nowhere/x.md")
    fails(rt, sid, "read_file", "IS_A_DIRECTORY", path="~/notes")
    fails(rt, sid, "read_file", "NOT_A_DIRECTORY", path="~/notes/todo.md/x")
    fails(rt, sid, "read_file", "PATH_NOT_FOUND", path="~/notes/nothing.md")
    photo = ok(rt, sid, "find_files", directory="~/Pictures", name="*.jpg")["matches"][0]["path"]
    error = fails(rt, sid, "read_file", "BINARY_FILE", path=photo)
    assert error["details"]["mime"] == "image/jpeg"
    fails(rt, sid, "write_file", "PATH_NOT_FOUND", path="~/notes/new.md", content="x", create_if_missing=False)
    text = "".join(f"line {n}\n" for n in range(1, 26))
    assert ok(rt, sid, "write_file", path="~/notes/lines.txt", content=text)["created"]
    pages, offset = [], 0
    while offset is not None:
        page = ok(rt, sid, "read_file", path="~/notes/lines.txt", offset=offset, limit=7)
        pages.append(page["content"])
        offset = page["next_offset"]
    assert "".join(pages) == text and len(pages) == 4
    assert ok(rt, sid, "head_file", path="~/notes/lines.txt", lines=2)["content"] == "line 1\nline 2\n"
    tail = ok(rt, sid, "tail_file", path="~/notes/lines.txt", lines=2)
    assert (tail["content"], tail["start_line"], tail["total_lines"]) == ("line 24\nline 25\n", 24, 25)
    fails(rt, sid, "edit_file", "TEXT_NOT_FOUND", path="~/notes/lines.txt", old_text="line 99", new_text="x")
    error = fails(rt, sid, "edit_file", "AMBIGUOUS_MATCH", path="~/notes/lines.txt", old_text="line 2", new_text="x")
    assert error["details"]["occurrences"] == 7  # 2, 20-25
    edited = ok(rt, sid, "edit_file", path="~/notes/lines.txt", old_text="line 25\n", new_text="the end\n")
    assert "-line 25" in edited["diff"] and "+the end" in edited["diff"]
    assert ok(rt, sid, "edit_file", path="~/notes/lines.txt", old_text="line", new_text="row",
              replace_all=True)["replacements"] == 24
    assert ok(rt, sid, "truncate_file", path="~/notes/lines.txt", size=6)["size"] == 6
    assert ok(rt, sid, "read_file", path="~/notes/lines.txt")["content"] == "row 1\n"
    ok(rt, sid, "write_file", path="~/notes/utf8.txt", content="naïve")  # 6 bytes; a cut never splits "ï"
    assert ok(rt, sid, "truncate_file", path="~/notes/utf8.txt", size=3)["size"] == 2


def test_writes_through_symlinks_and_deleting_links(rt, sid):
    project = ok(rt, sid, "read_symlink", path="~/current-project")["resolves_to"]
    ok(rt, sid, "append_to_file", path="~/current-project/README.md", content="Linked edit.\n")
    assert ok(rt, sid, "tail_file", path=f"{project}/README.md", lines=1)["content"] == "Linked edit.\n"
    assert ok(rt, sid, "list_directory", path="~/current-project")["path"] == project
    fails(rt, sid, "read_symlink", "NOT_A_SYMLINK", path="~/notes/todo.md", code="INVALID_ARGUMENT")
    ok(rt, sid, "delete_file", path="~/current-project")
    assert ok(rt, sid, "path_exists", path=project)["exists"]
    fails(rt, sid, "read_symlink", "PATH_NOT_FOUND", path="~/current-project")


def test_file_size_limit_and_quota(rt, sid):
    me, _, _ = people(rt, sid)
    error = fails(rt, sid, "truncate_file", "FILE_TOO_LARGE", path="~/notes/todo.md", size=MAX_TEXT_FILE_BYTES + 1)
    assert error["code"] == "RESOURCE_EXHAUSTED"
    ok(rt, sid, "create_file", path="~/big.txt")
    ok(rt, sid, "truncate_file", path="~/big.txt", size=MAX_TEXT_FILE_BYTES)
    fails(rt, sid, "append_to_file", "FILE_TOO_LARGE", path="~/big.txt", content="!")
    # Copying every photo would overflow the quota; details say by how much.
    before = used(rt, sid, me)
    error = fails(rt, sid, "copy_path", "QUOTA_EXCEEDED", source="~/Pictures", destination="~/Pictures-copy",
                  recursive=True)
    assert error["code"] == "RESOURCE_EXHAUSTED"
    assert error["details"]["used_bytes"] + error["details"]["needed_bytes"] > error["details"]["quota_bytes"]
    assert used(rt, sid, me) == before
    # Trash keeps counting until it is emptied; then there is room for one album.
    album = ok(rt, sid, "list_directory", path="~/Pictures", sort="size")["entries"][0]["path"]
    trashed = ok(rt, sid, "move_to_trash", path="~/Pictures")
    assert used(rt, sid, me) == before
    emptied = ok(rt, sid, "empty_trash")
    assert emptied["freed_bytes"] >= trashed["size"] and used(rt, sid, me) == before - emptied["freed_bytes"]
    fails(rt, sid, "restore_from_trash", "TRASH_ITEM_NOT_FOUND", trash_id=trashed["id"])
    assert not ok(rt, sid, "path_exists", path=album)["exists"]
    assert recomputed_usage(rt.state(sid))[me] == used(rt, sid, me)


def test_usage_stays_consistent_after_many_operations(rt, sid):
    _, colleague, _ = people(rt, sid)
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
            args["archive_id"] = ok(rt, sid, "list_archives")["archives"][-1]["id"]
        ok(rt, sid, tool, **args)
    state = rt.state(sid)
    assert recomputed_usage(state) == {u["id"]: u["used_bytes"] for u in state.users if u["used_bytes"]}


# -- moving and copying ---------------------------------------------------------------------------


def test_move_rules(rt, sid):
    me, _, _ = people(rt, sid)
    moved = ok(rt, sid, "move_path", source="~/notes/ideas.md", destination="~/Documents")
    assert moved["destination"] == f"/home/{me}/Documents/ideas.md"
    fails(rt, sid, "move_path", "PATH_NOT_FOUND", source="~/notes/ideas.md", destination="~/Documents")
    fails(rt, sid, "move_path", "ALREADY_EXISTS", source="~/notes/todo.md", destination="~/Documents/ideas.md")
    fails(rt, sid, "move_path", "SAME_PATH", source="~/notes/todo.md", destination="~/notes")
    fails(rt, sid, "move_path", "DESTINATION_INSIDE_SOURCE", source="~/notes", destination="~/notes/meetings/old")
    replaced = ok(rt, sid, "move_path", source="~/notes/todo.md", destination="~/Documents/ideas.md", overwrite=True)
    assert replaced["replaced"]
    assert ok(rt, sid, "read_file", path="~/Documents/ideas.md")["content"].startswith("# TODO")
    # A directory moves with everything inside, and the working directory follows it.
    ok(rt, sid, "change_directory", path="~/notes/meetings")
    ok(rt, sid, "move_path", source="~/notes", destination="~/Documents/notes-2026")
    assert ok(rt, sid, "get_current_user")["working_directory"] == f"/home/{me}/Documents/notes-2026/meetings"
    assert ok(rt, sid, "count_words", paths=["../archive/2024-taxes.md"])["total"]["lines"] == 4


def test_overwriting_moves_check_the_kinds(rt, sid):
    ok(rt, sid, "make_directory", path="~/stage/lonely.txt", parents=True)
    ok(rt, sid, "make_directory", path="~/stage/full/inner", parents=True)
    ok(rt, sid, "make_directory", path="~/stage/empty")
    ok(rt, sid, "create_file", path="~/lonely.txt")
    ok(rt, sid, "make_directory", path="~/full")
    ok(rt, sid, "make_directory", path="~/empty")
    fails(rt, sid, "move_path", "ALREADY_EXISTS", source="~/lonely.txt", destination="~/stage")
    fails(rt, sid, "move_path", "IS_A_DIRECTORY", source="~/lonely.txt", destination="~/stage", overwrite=True)
    fails(rt, sid, "move_path", "DIRECTORY_NOT_EMPTY", source="~/full", destination="~/stage", overwrite=True)
    fails(rt, sid, "move_path", "NOT_A_DIRECTORY", source="~/full", destination="~/lonely.txt", overwrite=True)
    ok(rt, sid, "change_directory", path="~/stage/empty")
    fails(rt, sid, "move_path", "DIRECTORY_IN_USE", source="~/empty", destination="~/stage", overwrite=True)
    ok(rt, sid, "change_directory", path="~")
    assert ok(rt, sid, "move_path", source="~/empty", destination="~/stage", overwrite=True)["replaced"]
    fails(rt, sid, "move_path", "OPERATION_NOT_PERMITTED", source="/", destination="~/root")


def test_copy_rules(rt, sid):
    me, _, _ = people(rt, sid)
    project = ok(rt, sid, "read_symlink", path="~/current-project")["resolves_to"]
    fails(rt, sid, "copy_path", "IS_A_DIRECTORY", source=project, destination="~/backup")
    fails(rt, sid, "copy_path", "DESTINATION_INSIDE_SOURCE", source=project, destination=f"{project}/src/copy",
          recursive=True)
    fails(rt, sid, "copy_path", "SAME_PATH", source="~/notes/todo.md", destination="~/notes/todo.md", overwrite=True)
    copied = ok(rt, sid, "copy_path", source=project, destination="~/backup", recursive=True)
    originals = ok(rt, sid, "find_files", directory=project, type="file", limit=100)["matches"]
    assert copied["entries_copied"] == 1 + ok(rt, sid, "find_files", directory=project, limit=100)["total"]
    for entry in originals:
        twin = entry["path"].replace(project, f"/home/{me}/backup")
        assert ok(rt, sid, "hash_file", path=twin)["sha256"] == ok(rt, sid, "hash_file", path=entry["path"])["sha256"]
    again = ok(rt, sid, "copy_path", source=project, destination="~/backup", recursive=True)  # cp -r nests
    assert again["destination"] == f"/home/{me}/backup/{project.rsplit('/', 1)[1]}"
    # Copies belong to the copier; a file copy over a file needs overwrite.
    assert ok(rt, sid, "copy_path", source="/etc/hostname", destination="~")["destination"] == f"/home/{me}/hostname"
    assert ok(rt, sid, "get_file_info", path="~/hostname")["owner"] == me
    fails(rt, sid, "copy_path", "ALREADY_EXISTS", source="/etc/motd", destination="~/hostname")
    ok(rt, sid, "copy_path", source="/etc/motd", destination="~/hostname", overwrite=True)
    assert "Backups" in ok(rt, sid, "read_file", path="~/hostname")["content"]
    fails(rt, sid, "copy_path", "PERMISSION_DENIED", source="/etc/shadow", destination="~")
    fails(rt, sid, "copy_path", "PERMISSION_DENIED", source="~/notes/todo.md", destination="/etc")


# -- search and text tools ------------------------------------------------------------------------


def test_find_and_search(rt, sid):
    py = ok(rt, sid, "find_files", directory="~/projects", name="*.py", limit=100)
    assert py["total"] >= 4 and all(m["path"].endswith(".py") for m in py["matches"])
    dirs = ok(rt, sid, "find_files", directory="~", type="directory", max_depth=1, limit=100)["matches"]
    assert {m["path"].rsplit("/", 1)[1] for m in dirs} >= {"notes", "projects", "Pictures", ".ssh"}
    big = ok(rt, sid, "find_files", directory="~", min_size=1_000_000, limit=100)["matches"]
    assert big and all(m["size"] >= 1_000_000 and m["type"] == "file" for m in big)
    assert ok(rt, sid, "find_files", directory="~/notes", name="TODO.MD", ignore_case=True)["total"] == 1
    todos = ok(rt, sid, "search_file_contents", directory="~", text="TODO", limit=100)
    assert todos["total"] >= 5
    assert all("TODO" in f["first_match"]["line"] for f in todos["files"])
    page = ok(rt, sid, "search_file_contents", directory="~", text="todo", ignore_case=True, limit=2)
    assert page["next_offset"] == 2 and page["total"] >= todos["total"]
    fails(rt, sid, "find_files", "NOT_A_DIRECTORY", directory="~/notes/todo.md")
    fails(rt, sid, "search_file_contents", "PERMISSION_DENIED", directory="/root", text="x")


def test_grep_diff_hash_and_counts(rt, sid):
    grep = ok(rt, sid, "grep_file", path="/etc/passwd", pattern="/home/", context=1)
    assert grep["match_count"] == 3 and grep["matches"][0]["before"] == ["root:x:0:0:System Administrator:/root:"
                                                                          "/bin/bash"]
    unchecked = ok(rt, sid, "grep_file", path="~/notes/todo.md", pattern="- [x]", invert=True)
    assert all("[x]" not in m["line"] for m in unchecked["matches"])
    ok(rt, sid, "copy_path", source="~/notes/todo.md", destination="~/todo-copy.md")
    same = ok(rt, sid, "diff_files", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    assert same["identical"] and same["diff"] == ""
    assert ok(rt, sid, "hash_file", path="~/todo-copy.md")["sha256"] == ok(rt, sid, "hash_file",
                                                                          path="~/notes/todo.md")["sha256"]
    ok(rt, sid, "append_to_file", path="~/todo-copy.md", content="- [ ] Water the ferns\n")
    diff = ok(rt, sid, "diff_files", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    assert (diff["identical"], diff["lines_added"], diff["lines_removed"]) == (False, 1, 0)
    assert "+- [ ] Water the ferns" in diff["diff"]
    digest = ok(rt, sid, "hash_file", path="~/todo-copy.md")["sha256"]
    assert ok(rt, sid, "hash_file", path="~/todo-copy.md", expected=digest.upper())["matches"] is True
    fails(rt, sid, "hash_file", "IS_A_DIRECTORY", path="~/notes")
    ok(rt, sid, "truncate_file", path="~/todo-copy.md", size=300_000)
    fails(rt, sid, "diff_files", "FILE_TOO_LARGE", path_a="~/notes/todo.md", path_b="~/todo-copy.md")
    photo = ok(rt, sid, "find_files", directory="~/Pictures", name="*.jpg")["matches"][0]["path"]
    fails(rt, sid, "diff_files", "BINARY_FILE", path_a=photo, path_b="~/notes/todo.md")
    fails(rt, sid, "count_words", "BINARY_FILE", paths=["~/notes/todo.md", photo])
    counts = ok(rt, sid, "count_words", paths=["/etc/hostname", "/etc/timezone"])
    assert counts["total"] == {"lines": 2, "words": 2, "characters": counts["total"]["bytes"],
                               "bytes": sum(f["bytes"] for f in counts["files"])}


# -- archives and trash ---------------------------------------------------------------------------


def test_archive_round_trip(rt, sid):
    me, _, _ = people(rt, sid)
    before = used(rt, sid, me)
    archive = ok(rt, sid, "create_archive", name="notes-snapshot", paths=["~/notes", "~/.bashrc"])
    assert used(rt, sid, me) == before + archive["size"] and archive["size"] < archive["total_bytes"]
    assert archive["id"] in {a["id"] for a in ok(rt, sid, "list_archives")["archives"]}
    entries = ok(rt, sid, "list_archive_entries", archive_id=archive["id"], limit=100)["entries"]
    assert {"notes/todo.md", "notes/meetings", ".bashrc"} <= {e["path"] for e in entries}
    fails(rt, sid, "create_archive", "ALREADY_EXISTS", name="notes-snapshot", paths=["~/notes"], code="CONFLICT")
    fails(rt, sid, "create_archive", "DUPLICATE_ENTRY", name="other", paths=["~/notes", "~/notes"])
    fails(rt, sid, "create_archive", "PERMISSION_DENIED", name="secrets", paths=["/etc"])
    ok(rt, sid, "make_directory", path="~/restore")
    extracted = ok(rt, sid, "extract_archive", archive_id=archive["id"], destination="~/restore")
    assert extracted["created"] == len(entries)
    for original in ("~/notes/todo.md", "~/.bashrc"):
        copy = "~/restore/" + original.removeprefix("~/")
        assert ok(rt, sid, "hash_file", path=copy)["sha256"] == ok(rt, sid, "hash_file", path=original)["sha256"]
    ok(rt, sid, "write_file", path="~/restore/notes/todo.md", content="local change\n")
    fails(rt, sid, "extract_archive", "ALREADY_EXISTS", archive_id=archive["id"], destination="~/restore")
    # The extracted read-only tax note refuses to be overwritten until its mode allows it.
    error = fails(rt, sid, "extract_archive", "PERMISSION_DENIED", archive_id=archive["id"], destination="~/restore",
                  overwrite=True)
    assert error["details"]["path"].endswith("/restore/notes/archive/2024-taxes.md")
    ok(rt, sid, "change_mode", path="~/restore/notes/archive/2024-taxes.md", mode="644")
    again = ok(rt, sid, "extract_archive", archive_id=archive["id"], destination="~/restore", overwrite=True)
    assert (again["created"], again["replaced"]) == (0, 2)  # todo.md's text and the tax note's mode
    assert ok(rt, sid, "get_file_info", path="~/restore/notes/archive/2024-taxes.md")["mode"] == "0444"
    assert ok(rt, sid, "read_file", path="~/restore/notes/todo.md")["content"].startswith("# TODO")
    fails(rt, sid, "extract_archive", "PERMISSION_DENIED", archive_id=archive["id"], destination="/etc")
    fails(rt, sid, "list_archive_entries", "ARCHIVE_NOT_FOUND", archive_id="arc_missing", code="NOT_FOUND")


def test_archives_are_capped_in_entries(rt, sid, monkeypatch):
    monkeypatch.setattr(filesystem, "MAX_ARCHIVE_ENTRIES", 5)
    error = fails(rt, sid, "create_archive", "TOO_MANY_ENTRIES", name="everything", paths=["~/notes"])
    assert error["code"] == "RESOURCE_EXHAUSTED" and error["details"]["limit"] == 5
    ok(rt, sid, "create_archive", name="small", paths=["~/notes/todo.md", "~/.bashrc"])


def test_archives_of_other_users_and_hostile_entries(rt, sid):
    _, colleague, _ = people(rt, sid)
    state = rt.state(sid)
    theirs = state.archives.first(owner=colleague)["id"]
    fails(rt, sid, "list_archive_entries", "PERMISSION_DENIED", archive_id=theirs)
    fails(rt, sid, "extract_archive", "PERMISSION_DENIED", archive_id=theirs)
    # Arrange: archive records no tool would write; extraction still refuses to leave the destination.
    mine = state.archives.first(owner=state.get_var("user"))
    base = {"mode": 0o644, "size": 1, "content": "x", "binary": False, "mime": "text/plain", "sha256": None,
            "target": None, "meta": None}
    slip = state.archives.insert({**mine, "id": "arc_slip", "entries": [{**base, "kind": "file", "path": "../../x"}]})
    link = state.archives.insert({**mine, "id": "arc_link", "entries": [
        {**base, "kind": "symlink", "path": "escape", "target": "../../../../../../../etc", "content": None}]})
    for archive in (slip, link):
        fails(rt, sid, "extract_archive", "PATH_OUTSIDE_ROOT", archive_id=archive["id"], destination="~")


def test_trash_round_trip(rt, sid):
    me, colleague, _ = people(rt, sid)
    item = ok(rt, sid, "move_to_trash", path="~/notes/meetings")
    assert item["type"] == "directory" and item["item_count"] > 1
    assert not ok(rt, sid, "path_exists", path="~/notes/meetings")["exists"]
    assert ok(rt, sid, "list_trash")["items"][0]["id"] == item["id"]
    assert ok(rt, sid, "search_file_contents", directory="~/notes", text="Standup")["total"] == 0
    ok(rt, sid, "make_directory", path="~/notes/meetings")
    fails(rt, sid, "restore_from_trash", "ALREADY_EXISTS", trash_id=item["id"])
    restored = ok(rt, sid, "restore_from_trash", trash_id=item["id"], destination="~/notes/old-meetings")
    assert restored["restored_path"] == f"/home/{me}/notes/old-meetings"
    assert ok(rt, sid, "search_file_contents", directory="~/notes", text="Standup")["total"] == item["item_count"] - 1
    fails(rt, sid, "restore_from_trash", "TRASH_ITEM_NOT_FOUND", trash_id=item["id"])
    # The seeded trashed draft cannot go back once its directory is gone.
    draft = ok(rt, sid, "list_trash")["items"][0]
    ok(rt, sid, "move_to_trash", path="~/Documents")
    fails(rt, sid, "restore_from_trash", "PATH_NOT_FOUND", trash_id=draft["id"])
    theirs = rt.state(sid).trash.first(owner=colleague)["id"]
    fails(rt, sid, "restore_from_trash", "PERMISSION_DENIED", trash_id=theirs)
    fails(rt, sid, "empty_trash", "PERMISSION_DENIED", trash_id=theirs)
    fails(rt, sid, "empty_trash", "TRASH_ITEM_NOT_FOUND", trash_id="trs_missing")
    assert ok(rt, sid, "empty_trash", trash_id=draft["id"])["deleted_items"] == 1
    assert ok(rt, sid, "list_trash")["total"] == 1


def test_ids_flow_from_one_tool_to_the_next(rt, sid):
    """Listing finds a project, an archive of it is made, its id lists and extracts it; a trash id
    restores what was trashed."""
    project = ok(rt, sid, "list_directory", path="~/projects")["entries"][0]
    files = ok(rt, sid, "find_files", directory=project["path"], type="file")["total"]
    archive = ok(rt, sid, "create_archive", name=f"{project['name']}-v1", paths=[project["path"]])
    first_entry = ok(rt, sid, "list_archive_entries", archive_id=archive["id"], limit=1)["entries"][0]
    assert first_entry["path"] == project["name"] and first_entry["type"] == "directory"
    trashed = ok(rt, sid, "move_to_trash", path=project["path"])
    assert not ok(rt, sid, "path_exists", path=project["path"])["exists"]
    out = ok(rt, sid, "extract_archive", archive_id=archive["id"], destination="~/projects")
    assert out["created"] == archive["entry_count"]
    fails(rt, sid, "restore_from_trash", "ALREADY_EXISTS", trash_id=trashed["id"])
    ok(rt, sid, "remove_directory", path=project["path"], recursive=True)
    assert ok(rt, sid, "restore_from_trash", trash_id=trashed["id"])["restored_path"] == project["path"]
    assert ok(rt, sid, "find_files", directory=project["path"], type="file")["total"] == files >= 5


def test_tree_and_disk_usage(rt, sid):
    tree = ok(rt, sid, "get_tree", path="~", max_depth=1)
    assert "├── notes/" in tree["tree"] and ".bashrc" not in tree["tree"]
    assert "current-project -> projects/" in tree["tree"]
    assert ok(rt, sid, "get_tree", path="/", max_depth=8, max_entries=10)["truncated"]
    assert "[permission denied]" in ok(rt, sid, "get_tree", path="/home")["tree"]
    du = ok(rt, sid, "get_disk_usage", path="~")
    assert du["largest"][0]["path"].endswith("/Pictures") and du["quota"]["quota_bytes"] > du["quota"]["used_bytes"]
    pictures = ok(rt, sid, "get_disk_usage", path="~/Pictures")["total_bytes"]
    assert pictures == sum(m["size"] for m in ok(rt, sid, "find_files", directory="~/Pictures", type="file",
                                                   limit=100)["matches"])
    listing = ok(rt, sid, "list_directory", path="~", show_hidden=True, sort="size", limit=3)
    assert listing["total"] > 3 and listing["next_offset"] == 3
    assert {e["name"] for e in ok(rt, sid, "list_directory", path="~", show_hidden=True)["entries"]} >= {".ssh"}
