"""A small lending library: books with copies, members with loan limits, loans with due dates."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

import attrs
from pydantic import Field

from prove_core.toolkit import FailedPrecondition, Server, State, Table, fake, paginate, ref, require

GENRES = ("fiction", "history", "science", "children", "travel")
TITLE_WORDS = ("Silent", "River", "Garden", "Atlas", "Winter", "Harbor", "Quantum", "Lantern", "Empire", "Orchard")
LOAN_DAYS = 21
MAX_RENEWALS = 2


class LibraryState(State):
    books = Table("book", prefix="bk")
    members = Table("member", prefix="mem")
    loans = Table("loan", prefix="ln")


@attrs.frozen(kw_only=True)
class LibraryOptions:
    books: int = attrs.field(default=20, validator=attrs.validators.gt(0))


def build_library(rng, options: LibraryOptions) -> LibraryState:
    state = LibraryState(salt=str(rng.random()))
    for _ in range(options.books):
        title = f"The {rng.choice(TITLE_WORDS)} {rng.choice(TITLE_WORDS)}"
        copies = rng.randint(1, 3)
        state.books.insert({"title": title, "author": fake.full_name(rng), "genre": rng.choice(GENRES),
                            "copies": copies, "available": copies})
    for i in range(4):
        state.members.insert({"name": fake.full_name(rng), "max_loans": 3, "suspended": i == 3})
    return state


server = Server("library", domain="knowledge", description="A lending library: books, members and loans.",
                state=LibraryState, seed=build_library, options=LibraryOptions)


def _active_member(state):
    return state.members.first(suspended=False)


def _borrowable(state):
    return state.books.first(lambda b: b["available"] > 0)


@server.tool(read_only=True, reads=["book"], examples=[{"genre": "fiction"}, {"available_only": True}])
def search_books(
    state: LibraryState,
    query: Annotated[str, Field(description="Words to find in the title or author.", max_length=200)] = "",
    genre: Annotated[Literal["fiction", "history", "science", "children", "travel"] | None,
                     Field(description="Only books of this genre.")] = None,
    available_only: Annotated[bool, Field(description="Only books with a copy on the shelf.")] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size.")] = 10,
    offset: Annotated[int, Field(ge=0, description="Books to skip.")] = 0,
) -> dict:
    """Search the catalogue. Returns a page of books with how many copies are on the shelf."""
    words = query.lower().split()
    found = state.books.where(lambda b: (genre is None or b["genre"] == genre)
                              and (not available_only or b["available"] > 0)
                              and all(w in (b["title"] + " " + b["author"]).lower() for w in words))
    return paginate(found, limit=limit, offset=offset, key="books")


@server.tool(read_only=True, reads=["book"], errors=["BOOK_NOT_FOUND"],
             examples=[lambda s: {"book_id": s.books.first()["id"]}])
def get_book(state: LibraryState, book_id: Annotated[str, ref("book", "The book's id.")]) -> dict:
    """One book with its copies and availability. Fails with BOOK_NOT_FOUND."""
    return state.books.get(book_id)


@server.tool(read_only=True, reads=["member", "loan"], errors=["MEMBER_NOT_FOUND"],
             examples=[lambda s: {"member_id": _active_member(s)["id"]}])
def get_member(state: LibraryState, member_id: Annotated[str, ref("member", "The member's id.")]) -> dict:
    """A member with their current loans. Fails with MEMBER_NOT_FOUND."""
    member = state.members.get(member_id)
    member["loans"] = state.loans.where(member_id=member_id, returned=False)
    return member


@server.tool(produces=["loan"], mutates=["book"], reads=["member"],
             errors=["MEMBER_NOT_FOUND", "BOOK_NOT_FOUND", "MEMBER_SUSPENDED", "NO_COPY_AVAILABLE",
                     "LOAN_LIMIT_REACHED", "ALREADY_BORROWED"],
             examples=[lambda s: {"member_id": _active_member(s)["id"], "book_id": _borrowable(s)["id"]}])
def borrow_book(state: LibraryState, member_id: Annotated[str, ref("member", "Who borrows.")],
                book_id: Annotated[str, ref("book", "The book to borrow.")]) -> dict:
    """Lend a copy for 21 days. Returns the loan with its due date. Fails with MEMBER_NOT_FOUND,
    BOOK_NOT_FOUND, MEMBER_SUSPENDED, NO_COPY_AVAILABLE (every copy is out), LOAN_LIMIT_REACHED or
    ALREADY_BORROWED (the member has this book already)."""
    member, book = state.members.get(member_id), state.books.get(book_id)
    require(not member["suspended"], f"member {member_id} is suspended", reason="MEMBER_SUSPENDED")
    require(book["available"] > 0, f"no copy of {book['title']!r} is on the shelf", reason="NO_COPY_AVAILABLE")
    open_loans = state.loans.where(member_id=member_id, returned=False)
    require(len(open_loans) < member["max_loans"], "loan limit reached", reason="LOAN_LIMIT_REACHED")
    require(all(ln["book_id"] != book_id for ln in open_loans), "member already has this book", reason="ALREADY_BORROWED")
    state.books.update(book_id, available=book["available"] - 1)
    due = state.today() + dt.timedelta(days=LOAN_DAYS)
    return state.loans.insert({"member_id": member_id, "book_id": book_id, "due": due.isoformat(),
                               "renewals": 0, "returned": False})


def _loan_example(state):
    # A loan exists only after borrow_book; examples run on a fresh seed, so borrow first.
    loan = state.loans.first(returned=False)
    if loan is None:
        member, book = _active_member(state), _borrowable(state)
        loan = borrow_book(state, member_id=member["id"], book_id=book["id"])
    return {"loan_id": loan["id"]}


@server.tool(mutates=["loan"], errors=["LOAN_NOT_FOUND", "ALREADY_RETURNED", "RENEWAL_LIMIT"],
             examples=[_loan_example])
def renew_loan(state: LibraryState, loan_id: Annotated[str, ref("loan", "The loan to extend.")]) -> dict:
    """Extend a loan by 21 days, at most twice. Fails with LOAN_NOT_FOUND, ALREADY_RETURNED or
    RENEWAL_LIMIT (renewed twice already)."""
    loan = state.loans.get(loan_id)
    require(not loan["returned"], "loan already returned", reason="ALREADY_RETURNED")
    require(loan["renewals"] < MAX_RENEWALS, "renewal limit reached", reason="RENEWAL_LIMIT")
    due = dt.date.fromisoformat(loan["due"]) + dt.timedelta(days=LOAN_DAYS)
    return state.loans.update(loan_id, due=due.isoformat(), renewals=loan["renewals"] + 1)


# destructive=False (the default, spelled out): the loan is closed, not deleted. idempotent=True:
# a second return of the same loan fails with ALREADY_RETURNED and changes nothing.
@server.tool(mutates=["loan", "book"], destructive=False, idempotent=True, errors=["LOAN_NOT_FOUND", "ALREADY_RETURNED"],
             examples=[_loan_example])
def return_book(state: LibraryState, loan_id: Annotated[str, ref("loan", "The loan to close.")]) -> dict:
    """Return the copy of a loan to the shelf. Fails with LOAN_NOT_FOUND or ALREADY_RETURNED."""
    loan = state.loans.get(loan_id)
    if loan["returned"]:
        raise FailedPrecondition("loan already returned", reason="ALREADY_RETURNED")
    book = state.books.get(loan["book_id"])
    state.books.update(book["id"], available=book["available"] + 1)
    return state.loans.update(loan_id, returned=True)
