"""The seed tree: a laptop with system directories, three users' homes, projects, notes,
documents, photos, a shared team directory, /tmp, archives and trash.
"""

from __future__ import annotations

import datetime as dt
import math
import random

from prove_core.toolkit import Record, fake, iso_datetime
from prove_servers.filesystem.access import _add
from prove_servers.filesystem.model import MIB, ROOT, FsState
from prove_servers.filesystem.nodes import _insert_node, _text_fields
from prove_servers.filesystem.ops import _archive_entries, _insert_archive, _trash

# -- vocabulary ------------------------------------------------------------------------------------

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


# -- the tree --------------------------------------------------------------------------------------


class _Seeder:
    """Builds the seed tree with the same node shape the tools write."""

    def __init__(self, state: FsState, rng: random.Random) -> None:
        self.state, self.rng = state, rng
        self.today = state.today()

    def ago(self, low: int, high: int) -> str:
        when = self.state.now() - dt.timedelta(days=self.rng.randint(low, high), minutes=self.rng.randint(0, 1439))
        return iso_datetime(when)

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
