import pytest

from prove_core.errors import NotFound
from prove_core.toolkit import State, Table
from tests.support.toy import WalletOptions, server


class Shop(State):
    items = Table("item", prefix="itm")


def test_insert_get_update_delete_roundtrip():
    state = Shop(salt="s")
    item = state.items.insert({"name": "lamp", "price": 10.0})
    assert item["id"].startswith("itm_") and "_seq" not in item
    assert state.items.get(item["id"]) == item
    updated = state.items.update(item["id"], price=12.5)
    assert updated["price"] == 12.5 and state.items.get(item["id"])["price"] == 12.5
    state.items.delete(item["id"])
    assert item["id"] not in state.items
    with pytest.raises(NotFound) as err:
        state.items.get(item["id"])
    assert err.value.reason == "ITEM_NOT_FOUND"


def test_reads_return_copies_so_callers_cannot_corrupt_state():
    state = Shop()
    item = state.items.insert({"name": "lamp"})
    got = state.items.get(item["id"])
    got["name"] = "changed"
    assert state.items.get(item["id"])["name"] == "lamp"


def test_where_keeps_insertion_order_and_filters():
    state = Shop()
    names = [f"n{i}" for i in range(20)]
    for i, n in enumerate(names):
        state.items.insert({"name": n, "even": i % 2 == 0})
    assert [r["name"] for r in state.items.all()] == names
    assert [r["name"] for r in state.items.where(even=True)] == names[::2]
    assert state.items.first(lambda r: r["name"] == "n7")["name"] == "n7"


def test_ids_are_deterministic_opaque_and_salted():
    a, b, c = Shop(salt="1"), Shop(salt="1"), Shop(salt="2")
    ids_a = [a.items.insert({})["id"] for _ in range(5)]
    ids_b = [b.items.insert({})["id"] for _ in range(5)]
    ids_c = [c.items.insert({})["id"] for _ in range(5)]
    assert ids_a == ids_b and ids_a != ids_c
    assert len(set(ids_a)) == 5 and not any(i.endswith("1") and i[-2:] == "01" for i in ids_a)


def test_snapshot_fork_is_independent_and_shares_records():
    state = Shop()
    for i in range(100):
        state.items.insert({"n": i})
    snap = state.snapshot()
    fork = State.from_snapshot(snap)
    assert fork.state_hash() == state.state_hash()
    fork.items.insert({"n": "new"})
    assert len(fork.items) == 101 and len(state.items) == 100
    # structural sharing: the untouched table of the fork is the very same map object
    other = State.from_snapshot(snap)
    assert other._tables["items"] is snap.tables["items"]


def test_restore_undoes_writes_and_noop_update_changes_nothing():
    state = Shop()
    item = state.items.insert({"n": 1})
    snap = state.snapshot()
    h = state.state_hash()
    state.items.update(item["id"], n=1)  # no-op
    assert not state.changed_since(snap)
    state.items.update(item["id"], n=2)
    assert state.changed_since(snap) and state.state_hash() != h
    state.restore(snap)
    assert state.state_hash() == h


def test_state_hash_depends_on_content_not_on_insertion_history():
    s1, s2 = Shop(salt="x"), Shop(salt="x")
    a = s1.items.insert({"n": 1})
    s2.items.insert({"n": 1})
    s1.items.update(a["id"], n=5)
    s1.items.update(a["id"], n=1)
    assert s1.state_hash() == s2.state_hash()


def test_seeded_build_is_deterministic_and_sized_by_options():
    assert server.build_state(3).state_hash() == server.build_state(3).state_hash()
    assert server.build_state(3).state_hash() != server.build_state(4).state_hash()
    assert len(server.build_state(0, WalletOptions(wallets=30)).wallets) == 30


def test_clock_is_per_state_and_advances_only_when_asked():
    state, other = Shop(), Shop()
    t0 = state.now()
    assert other.now() == t0  # every state starts at the same fixed date
    state.items.insert({"name": "lamp"})  # reads and writes do not move the clock...
    assert state.now() == state.now() == t0
    state.advance_clock(120)  # ...only advance_clock does, by the seconds asked
    assert (state.now() - t0).total_seconds() == 120
    state.advance_clock()
    assert (state.now() - t0).total_seconds() == 180  # the default tick is one minute
    assert other.now() == t0  # per state: another state's clock did not move
    snap = state.snapshot()
    state.advance_clock(60)
    state.restore(snap)
    assert (state.now() - t0).total_seconds() == 180  # the clock is state: a restore rewinds it


class Ledger(State):
    entries = Table("entry", prefix="ent", index=("account", "tags"))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ops = st.lists(
    st.tuples(st.sampled_from(["insert", "update", "delete"]), st.integers(0, 30), st.sampled_from(["a", "b", "c", None])),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_indexed_where_always_equals_a_full_scan(operations):
    state = Ledger()
    ids = []
    for op, n, account in operations:
        if op == "insert" or not ids:
            ids.append(state.entries.insert({"account": account, "n": n, "tags": [account]})["id"])
        elif op == "update":
            state.entries.update(ids[n % len(ids)], account=account, tags=[account, n])
        else:
            state.entries.delete(ids.pop(n % len(ids)))
    fork = State.from_snapshot(state.snapshot())
    for account in ("a", "b", "c", None):
        scanned = [r for r in state.entries.all() if r["account"] == account]
        assert state.entries.where(account=account) == scanned
        assert fork.entries.where(account=account) == scanned
        assert state.entries.where(account=account, n=3) == [r for r in scanned if r["n"] == 3]


def test_indexes_do_not_enter_the_state_hash():
    class Plain(State):
        entries = Table("entry", prefix="ent")

    class Indexed(State):
        entries = Table("entry", prefix="ent", index=("account",))

    a, b = Plain(salt="1"), Indexed(salt="1")
    for state in (a, b):
        state.entries.insert({"account": "x"})
    assert a.state_hash() == b.state_hash()


def test_nested_values_are_never_shared_with_the_stored_record():
    state = Shop()
    tags = ["a"]
    item = state.items.insert({"tags": tags, "dims": {"w": 1}})
    tags.append("leak")  # the caller's list
    got = state.items.get(item["id"])
    got["tags"].append("x")
    got["dims"]["w"] = 99
    fork = State.from_snapshot(state.snapshot())
    assert fork.items.get(item["id"]) == {"id": item["id"], "tags": ["a"], "dims": {"w": 1}}


def test_a_parameter_named_title_survives_schema_generation():
    from typing import Annotated

    from pydantic import Field

    from prove_core.toolkit import Server

    srv = Server("t", domain="d", description="d", state=Shop, seed=lambda rng, o: Shop())

    @srv.tool()
    def write(state: Shop, title: Annotated[str, Field(description="The title.")]) -> dict:
        """Write."""
        return {}

    params = srv.tools["write"].spec.parameters
    assert params["properties"]["title"] == {"description": "The title.", "type": "string"}
    assert params["required"] == ["title"]


def test_money_rounds_half_away_from_zero_and_never_gives_negative_zero():
    from prove_core.toolkit import money

    assert money(2.675) == 2.68 and money(-2.675) == -2.68
    assert str(money(-1e-12)) == "0.0"


def test_setting_a_variable_to_its_value_is_not_a_change():
    state = Shop()
    state.set_var("mode", "park")
    snap = state.snapshot()
    state.set_var("mode", "park")
    assert not state.changed_since(snap)
    state.set_var("mode", "drive")
    assert state.changed_since(snap)


def test_get_can_name_its_own_not_found_reason():
    with pytest.raises(NotFound) as err:
        Shop().items.get("AAPL", reason="UNKNOWN_SYMBOL")
    assert err.value.reason == "UNKNOWN_SYMBOL" and err.value.code.value == "NOT_FOUND"
