"""The server object, its seed function and what its tools share: parameter types and the
values users name when they ask for a tool (``asks``/``values``).
"""

from __future__ import annotations

import random
from typing import Annotated

from pydantic import Field

from prove_core.toolkit import Server, ref
from prove_servers.filesystem.model import MAX_WRITE_CHARS, FsOptions, FsState
from prove_servers.filesystem.seed import _Seeder

# -- what users name when they ask for a tool ------------------------------------------------------

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


# -- the server ------------------------------------------------------------------------------------


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


# -- parameter types the tools share ---------------------------------------------------------------

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

_PATH_HELP = ("absolute (/home/...), relative to the working directory, or ~/... for the home directory; one "
              "that does not resolve fails with INVALID_PATH, PATH_OUTSIDE_ROOT, PATH_NOT_FOUND, NOT_A_DIRECTORY, "
              "PERMISSION_DENIED or SYMLINK_LOOP")
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


# -- asks helpers ----------------------------------------------------------------------------------


def _here(a: dict, key: str, found: list[str]) -> list[str]:
    """Templates for a call without the directory ``key``: it means the working directory."""
    return found if key in a else [t.replace("{" + key + "}", "the current directory") for t in found]
