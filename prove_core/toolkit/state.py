"""Session state: tables of records in persistent maps, so a fork is O(number of tables).

A server declares its state as a ``State`` subclass with ``Table`` attributes::

    class BankState(State):
        accounts = Table("account", prefix="acc")
        payees = Table("payee", prefix="pye")

Every table is an ``immutables.Map`` (a hash array mapped trie). Records are plain dicts that
are never changed in place: ``update`` stores a new dict. Because nothing is shared mutably,
``snapshot()`` and ``State.from_snapshot()`` only copy the small dict of table references —
the cost does not grow with the number of records — and thousands of sessions forked from one
seed share its records in memory. The same property gives atomic tool calls: the executor
takes a snapshot before a call and restores it if the call raises.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

import attrs
import immutables

from prove_core.errors import NotFound

_CLOCK = "__clock__"
_SALT = "__salt__"
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case

# A record table maps ids to records; an index maps a field value to the set (a map to True) of
# the ids having it. ``State._tables`` holds both kinds, under different names.
_Records: TypeAlias = "immutables.Map[str, dict[str, Any]]"
_Index: TypeAlias = "immutables.Map[Any, immutables.Map[str, bool]]"
_AnyTable: TypeAlias = "immutables.Map[Any, Any]"


@attrs.frozen
class Snapshot:
    """An immutable picture of a session's state: tables, counters and scalar variables."""

    state_type: type[State]
    tables: dict[str, _AnyTable]
    counters: immutables.Map[str, int]
    vars: immutables.Map[str, Any]

    @property
    def clock(self) -> int:
        """The session's clock, in seconds since the epoch (it ticks once per changing call)."""
        return int(self.vars[_CLOCK])

    def table_names(self) -> tuple[str, ...]:
        """The record tables of this state (indexes left out), as its ``State`` class declares them."""
        return tuple(self.state_type._table_specs)

    def domain_vars(self) -> dict[str, Any]:
        """The variables the tools own: every one but the clock and the id salt (bookkeeping)."""
        return {k: v for k, v in self.vars.items() if k not in (_CLOCK, _SALT)}


# -- domain state: what the tools own, the clock and id counters aside ---------------------------

_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_EMPTY: Any = immutables.Map()


def _stamp(value: Any) -> float | None:
    """``value`` as seconds since the epoch when it is an ISO date-time string, else ``None``."""
    if not isinstance(value, str) or not _STAMP.fullmatch(value):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def same_record(a: Any, b: Any, window: tuple[float, float]) -> bool:
    """Equal records, except that two values stamped by the clock during an episode (ISO
    date-times inside ``window``, from the session's start to the later end clock) are equal:
    *when* a write happened is not what a task asks for, and a correction or an undo moves the
    clock."""
    if a is b or a == b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_record(a[k], b[k], window) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_record(x, y, window) for x, y in zip(a, b))
    low, high = window
    sa, sb = _stamp(a), _stamp(b)
    return sa is not None and sb is not None and low <= sa <= high and low <= sb <= high


def domain_differences(mine: Snapshot, theirs: Snapshot, window: tuple[float, float]) -> list[str]:
    """The tables of two snapshots of one server whose records differ, and ``"vars"`` when the
    variables the tools own do: the clock, the id salt and the id counters are not compared,
    and clock stamps inside ``window`` compare equal (``same_record``)."""
    out = []
    for table in mine.table_names():
        a, b = mine.tables[table], theirs.tables.get(table, _EMPTY)
        if a is b:
            continue
        if len(a) != len(b) or any(k not in b or not same_record(v, b[k], window) for k, v in a.items()):
            out.append(table)
    if mine.vars is not theirs.vars and not same_record(mine.domain_vars(), theirs.domain_vars(), window):
        out.append("vars")
    return out


def unseen_writes(step_ids: Sequence[str], writes: Sequence[bool], states: Sequence[Mapping[str, Snapshot]],
                  starts: Mapping[str, int]) -> list[str]:
    """The successful writes of a replay whose effect an end-state comparison cannot show: one
    that changes nothing in domain terms (``domain_differences`` of the states before and after
    it is empty), or every write when together they leave the domain state as it started (add,
    then remove). ``states[0]`` is the start, ``states[k + 1]`` the state after step ``k``, one
    ``Snapshot`` per server; ``writes[k]``: step ``k`` was a write that succeeded; ``starts``:
    each server's clock at the start."""

    def same(a: Mapping[str, Snapshot], b: Mapping[str, Snapshot]) -> bool:
        return all(not domain_differences(a[n], b[n], (float(starts.get(n, a[n].clock)), float(max(a[n].clock, b[n].clock))))
                   for n in a)

    unseen, before = [], states[0]
    for k, (step, write) in enumerate(zip(step_ids, writes)):
        if not write:
            continue
        if same(before, states[k + 1]):
            unseen.append(step)
        before = states[k + 1]
    done = [step for step, write in zip(step_ids, writes) if write]
    if done and same(states[0], states[-1]):
        return done
    return unseen


@attrs.frozen
class Change:
    """One record a call changed (``State.changes_since``): ``kind`` is ``created``, ``updated`` or
    ``deleted``; ``fields`` are the updated fields; ``before``/``after`` the record (None where it
    did not exist)."""

    entity: str
    id: str
    kind: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    fields: tuple[str, ...]


class Table:
    """Declares one id-keyed table on a ``State`` subclass; reading it gives a ``Collection``.

    ``index`` names fields that ``where(field=value)`` should look up instead of scanning (for
    example ``index=("account_id",)`` on transactions). Indexes are persistent maps too, kept
    beside the table, so they fork for free and never enter the state hash.
    """

    def __init__(self, entity: str, *, prefix: str, index: tuple[str, ...] = ()) -> None:
        self.entity = entity
        self.prefix = prefix
        self.index = tuple(index)
        self.name = ""

    def index_key(self, field: str) -> str:
        return f"{self.name}#{field}"

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, state: State | None, owner: type) -> Any:
        if state is None:
            return self
        return Collection(state, self)


class Collection:
    """A view of one table of one session. Reads return copies; writes replace records."""

    __slots__ = ("_state", "_table")

    def __init__(self, state: State, table: Table) -> None:
        self._state = state
        self._table = table

    @property
    def entity(self) -> str:
        return self._table.entity

    @property
    def _map(self) -> _Records:
        return self._state._tables[self._table.name]

    def _store(self, new_map: _Records) -> None:
        self._state._tables[self._table.name] = new_map

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._map

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.all())

    def new_id(self) -> str:
        return self._state.new_id(self._table.prefix)

    def get(self, record_id: str, *, reason: str | None = None) -> dict[str, Any]:
        """The record with this id, or a typed NOT_FOUND naming the entity (``reason`` overrides
        the default ``<ENTITY>_NOT_FOUND``, e.g. ``UNKNOWN_SYMBOL``)."""
        record = self._map.get(record_id)
        if record is None:
            raise self._not_found(record_id, reason=reason)
        return _public(record)

    def _not_found(self, record_id: str, *, reason: str | None = None) -> NotFound:
        return NotFound(
            f"{self._table.entity} {record_id!r} does not exist",
            reason=reason or f"{self._table.entity.upper()}_NOT_FOUND",
            id=record_id,
        )

    def find(self, record_id: str) -> dict[str, Any] | None:
        record = self._map.get(record_id)
        return None if record is None else _public(record)

    def all(self) -> list[dict[str, Any]]:
        """All records in id order (ids are opaque; insertion order is kept in ``_seq``)."""
        return [_public(r) for r in sorted(self._map.values(), key=_seq)]

    def where(self, predicate: Callable[[dict[str, Any]], bool] | None = None, **equals: Any) -> list[dict[str, Any]]:
        """Records matching every ``field=value`` and the optional predicate, in insertion order.
        An indexed field among ``equals`` narrows the candidates first."""
        table = self._map
        candidates: Any = table.values()
        buckets = []
        for field in self._table.index:
            if field in equals:
                bucket = self._state._tables[self._table.index_key(field)].get(_hashable(equals[field]))
                if bucket is None:
                    return []
                buckets.append(bucket)
        if buckets:  # walk the smallest bucket, keep ids present in every other one
            buckets.sort(key=len)
            smallest, others = buckets[0], buckets[1:]
            candidates = [table[rid] for rid in smallest if all(rid in b for b in others)]
        out = []
        for record in candidates:
            if any(record.get(k) != v for k, v in equals.items()):
                continue
            if predicate is not None and not predicate(record):
                continue
            out.append(record)
        out.sort(key=_seq)
        return [_public(r) for r in out]

    def first(self, predicate: Callable[[dict[str, Any]], bool] | None = None, **equals: Any) -> dict[str, Any] | None:
        found = self.where(predicate, **equals)
        return found[0] if found else None

    def insert(self, record: dict[str, Any]) -> dict[str, Any]:
        """Store a new record; an ``id`` is assigned unless the record has one. Returns a copy."""
        record = {k: _copy(v) for k, v in record.items()}
        record.setdefault("id", self.new_id())
        record["_seq"] = self._state.next_counter("_seq:" + self._table.name)
        if record["id"] in self._map:
            raise ValueError(f"{self._table.entity} {record['id']!r} already exists")
        self._store(self._map.set(record["id"], record))
        self._reindex(None, record)
        return _public(record)

    def update(self, record_id: str, **changes: Any) -> dict[str, Any]:
        current = self._map.get(record_id)
        if current is None:
            raise self._not_found(record_id)  # the typed NOT_FOUND
        record = {**current, **{k: _copy(v) for k, v in changes.items()}}
        if record == current:  # no-op updates leave the state (and its hash) untouched
            return _public(record)
        self._store(self._map.set(record_id, record))
        self._reindex(current, record)
        return _public(record)

    def delete(self, record_id: str) -> dict[str, Any]:
        self.get(record_id)  # the typed NOT_FOUND
        record = self._map[record_id]
        self._store(self._map.delete(record_id))
        self._reindex(record, None)
        return _public(record)

    def _reindex(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        tables = self._state._tables
        for field in self._table.index:
            before = None if old is None else _hashable(old.get(field))
            after = None if new is None else _hashable(new.get(field))
            if old is not None and new is not None and before == after:
                continue
            key = self._table.index_key(field)
            index: _Index = tables[key]
            if old is not None:
                bucket = index[before].delete(old["id"])
                index = index.set(before, bucket) if len(bucket) else index.delete(before)
            if new is not None:
                index = index.set(after, index.get(after, immutables.Map()).set(new["id"], True))
            tables[key] = index


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _table_text(table: _AnyTable) -> str:
    return _dumps({rid: table[rid] for rid in sorted(table.keys())})


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | None) else json.dumps(value, sort_keys=True)


def _seq(record: dict[str, Any]) -> int:
    seq: int = record.get("_seq", 0)
    return seq


def _copy(value: Any) -> Any:
    """A copy of nested JSON values; scalars are shared (immutable)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _public(record: dict[str, Any]) -> dict[str, Any]:
    # Nested lists and dicts are copied: the stored record is shared by every session forked
    # from the same snapshot, so handing out a reference would let one caller corrupt them all.
    out = dict(record)
    out.pop("_seq", None)  # the only internal field
    for key, value in out.items():
        if value.__class__ is dict or value.__class__ is list:
            out[key] = _copy(value)
    return out


def public(record: dict[str, Any]) -> dict[str, Any]:
    """A record as a tool returns it: internal bookkeeping fields (``_seq``) removed."""
    return _public(record)


class State:
    """Base class of every server's session state."""

    _table_specs: ClassVar[dict[str, Table]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs: dict[str, Table] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Table):
                    specs[name] = value
        cls._table_specs = specs

    def __init__(self, *, salt: str = "0", start: dt.datetime | None = None) -> None:
        self._tables: dict[str, _AnyTable] = {}
        for name, table in self._table_specs.items():
            self._tables[name] = immutables.Map()
            for field in table.index:
                self._tables[table.index_key(field)] = immutables.Map()
        self._counters: immutables.Map[str, int] = immutables.Map()
        start = start or dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
        self._vars: immutables.Map[str, Any] = immutables.Map({_SALT: str(salt), _CLOCK: int(start.timestamp())})

    # -- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return Snapshot(type(self), dict(self._tables), self._counters, self._vars)

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> State:
        state = snap.state_type.__new__(snap.state_type)
        state._tables = dict(snap.tables)
        state._counters = snap.counters
        state._vars = snap.vars
        return state

    def restore(self, snap: Snapshot) -> None:
        self._tables = dict(snap.tables)
        self._counters = snap.counters
        self._vars = snap.vars

    # -- scalars, counters, ids, clock ------------------------------------------------------
    def get_var(self, name: str, default: Any = None) -> Any:
        return self._vars.get(name, default)

    def set_var(self, name: str, value: Any) -> None:
        if name in self._vars and self._vars[name] == value:
            return  # unchanged: the state (and its clock) must not move
        self._vars = self._vars.set(name, value)

    def next_counter(self, name: str) -> int:
        value = self._counters.get(name, 0) + 1
        self._counters = self._counters.set(name, value)
        return value

    def new_id(self, prefix: str) -> str:
        """A deterministic but opaque id (``acc_7kq2m9xd``): same seed and calls, same ids."""
        n = self.next_counter("id:" + prefix)
        digest = hashlib.blake2b(f"{self._vars[_SALT]}:{prefix}:{n}".encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        chars = []
        for _ in range(8):
            value, rem = divmod(value, 32)
            chars.append(_ID_ALPHABET[rem])
        return f"{prefix}_{''.join(chars)}"

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self._vars[_CLOCK], tz=dt.UTC)

    def today(self) -> dt.date:
        return self.now().date()

    def advance_clock(self, seconds: int = 60) -> None:
        self._vars = self._vars.set(_CLOCK, self._vars[_CLOCK] + seconds)

    # -- hashing ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The whole state as plain JSON (tables by id, counters, variables), sorted."""
        return {
            "tables": {
                name: {rid: self._tables[name][rid] for rid in sorted(self._tables[name].keys())}
                for name in sorted(self._table_specs)
            },
            "counters": dict(sorted(self._counters.items())),
            "vars": dict(sorted(self._vars.items())),
        }

    def state_hash(self, table_texts: dict[str, tuple[_AnyTable, str]] | None = None) -> str:
        """A stable sha256 of the state: equal across processes for equal states.

        It hashes exactly ``json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"),
        default=str)``, built table by table so that ``table_texts`` (``table_texts()`` of an
        earlier state, e.g. the seed's) can supply the text of every table this state still
        shares with it by identity: a session that wrote to one table re-serializes that table only.
        """
        cache = table_texts or {}
        tables = []
        for name in sorted(self._table_specs):
            table = self._tables[name]
            hit = cache.get(name)
            text = hit[1] if hit is not None and hit[0] is table else _table_text(table)
            tables.append(f"{_dumps(name)}:{text}")
        blob = (f'{{"counters":{_dumps(dict(sorted(self._counters.items())))},"tables":{{{",".join(tables)}}},'
                f'"vars":{_dumps(dict(sorted(self._vars.items())))}}}')
        return hashlib.sha256(blob.encode()).hexdigest()

    def table_texts(self) -> dict[str, tuple[_AnyTable, str]]:
        """Each table with its serialized text, for ``state_hash(table_texts=...)`` of later states."""
        return {name: (self._tables[name], _table_text(self._tables[name])) for name in self._table_specs}

    def changed_since(self, snap: Snapshot) -> bool:
        """True if any table, counter or variable differs from ``snap`` (identity checks)."""
        if self._counters is not snap.counters or self._vars is not snap.vars:
            return True
        return any(self._tables[name] is not snap.tables.get(name) for name in self._tables)

    def changes_since(self, snap: Snapshot) -> list[Change]:
        """What the calls since ``snap`` did to the records of the tables (counters, the clock
        and other variables left out): each record created, deleted or updated, with the fields
        that changed. Tables untouched since ``snap`` cost one identity check."""
        out: list[Change] = []
        for name, spec in self._table_specs.items():
            now, then = self._tables[name], snap.tables.get(name)
            if now is then or then is None:
                continue
            for rid, record in sorted(now.items(), key=lambda kv: (_seq(kv[1]), kv[0])):  # creation order, not hash order
                old = then.get(rid)
                if old is None:
                    out.append(Change(spec.entity, rid, "created", None, _public(record), ()))
                elif old is not record and old != record:
                    fields = tuple(k for k in sorted(set(old) | set(record)) if k != "_seq" and old.get(k) != record.get(k))
                    if fields:
                        out.append(Change(spec.entity, rid, "updated", _public(old), _public(record), fields))
            for rid, old in sorted(then.items(), key=lambda kv: (_seq(kv[1]), kv[0])):
                if rid not in now:
                    out.append(Change(spec.entity, rid, "deleted", _public(old), None, ()))
        return out

    def table_sizes(self) -> dict[str, int]:
        return {name: len(self._tables[name]) for name in self._table_specs}
