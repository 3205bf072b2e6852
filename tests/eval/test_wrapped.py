"""Wrapping an external stateful Python object as a PROVE server (what the BFCL and τ² servers
build on), on a toy class: sessions, forks, rollbacks, fingerprints, typed errors, both paths."""

import random

import pytest

from prove_core.env.runtime import ServerRuntime
from prove_core.errors import FailedPrecondition
from prove_core.testing import audit
from prove_plugins.eval.servers.wrapped import ObjectServer, WrappedTool, canonical, fingerprint_of_attributes


class Node:
    def __init__(self, name, parent=None):
        self.name, self.parent, self.children = name, parent, []


class Shop:
    """A mutable external object: a stock table, a tree with back-references, a random generator."""

    def __init__(self, seed):
        self.stock = {"apple": 3 + seed, "pear": 1}
        self.root = Node("/")
        self.root.children.append(Node("a", self.root))
        self._random = random.Random(seed)
        self._last_seen = object()  # volatile: left out of the fingerprint

    def buy(self, item, state, count=1):  # a parameter named like the executor's first argument
        if self.stock.get(item, 0) < count:
            raise FailedPrecondition(f"only {self.stock.get(item, 0)} {item} left in {state}", reason="OUT_OF_STOCK")
        self.stock[item] -= count
        return {"left": self.stock[item]}

    def count(self, item):
        return self.stock.get(item, 0)


def _tool(name, call, properties, required, read_only=False):
    return WrappedTool(name=name, description=f"{name} an item.", read_only=read_only,
                       parameters={"type": "object", "additionalProperties": False, "required": required,
                                   "properties": properties},
                       call=call)


def build_shop():
    item = {"type": "string", "description": "The item."}
    return ObjectServer(
        name="toy_shop", domain="test", description="A toy external object.", module=__name__,
        build=lambda seed, _options: Shop(seed), fingerprint=fingerprint_of_attributes(["_last_seen"]),
        tools=[_tool("buy", lambda shop, /, **a: shop.buy(**a),
                     {"item": item, "state": {"type": "string", "description": "Where."},
                      "count": {"type": "integer", "description": "How many."}}, ["item", "state"]),
               _tool("count", lambda shop, /, **a: shop.count(**a), {"item": item}, ["item"], read_only=True)])


toy_shop = build_shop()  # a module attribute: the conformance kit finds it in a fresh process


def test_calls_write_copies_and_sessions_never_share_state():
    runtime = ServerRuntime(toy_shop, seed=0)
    a, b = runtime.new_session(), runtime.new_session()
    seed_object = runtime.state(a).backend()
    assert runtime.call(a, "buy", {"item": "apple", "state": "TX", "count": 2}).data == {"left": 1}
    assert runtime.call(a, "count", {"item": "apple"}).data == {"_value": 1}
    assert runtime.call(b, "count", {"item": "apple"}).data == {"_value": 3}
    assert seed_object.stock["apple"] == 3  # the stored object was never mutated
    fork = runtime.fork(a)
    runtime.call(fork, "buy", {"item": "apple", "state": "TX"})
    assert runtime.call(a, "count", {"item": "apple"}).data == {"_value": 1}
    runtime.reset(a)
    assert runtime.state_hash(a) == runtime.state_hash(b)


def test_failures_are_typed_and_roll_back_and_reads_leave_the_hash():
    runtime = ServerRuntime(toy_shop, seed=0)
    sid = runtime.new_session()
    before = runtime.state_hash(sid)
    result = runtime.call(sid, "buy", {"item": "pear", "state": "TX", "count": 5})
    assert result.error["reason"] == "OUT_OF_STOCK" and result.error["message"] == "only 1 pear left in TX"
    assert runtime.call(sid, "buy", {"item": "pear"}).code == "INVALID_ARGUMENT"
    runtime.call(sid, "count", {"item": "pear"})
    assert runtime.state_hash(sid) == before  # no clock tick: equal fingerprints are no change


def test_canonical_dump_handles_cycles_randomness_and_skips_volatile_fields():
    shop = Shop(0)
    picture = canonical(shop, skip=frozenset({"_last_seen"}))
    assert picture["root"]["children"][0]["parent"] == {"__ref__": "Node"}
    assert "_last_seen" not in picture and isinstance(picture["_random"], str)
    fingerprint = fingerprint_of_attributes(["_last_seen"])
    assert fingerprint(Shop(0)) == fingerprint(Shop(0)) != fingerprint(Shop(1))
    drawn = Shop(0)
    drawn._random.random()
    assert fingerprint(drawn) != fingerprint(Shop(0))  # drawing a number is a state change


def test_a_wrapped_object_passes_the_conformance_kit_where_it_has_examples():
    report = audit(toy_shop)
    passed = {c.name for c in report.checks if c.ok}
    assert {"schemas", "determinism", "isolation", "bad_input", "annotations", "path_equivalence"} <= passed
    assert not report.check("reachable").ok  # no example arguments: the kit says so
    with pytest.raises(NotImplementedError):
        toy_shop.seed_fn(random.Random(0), None)
