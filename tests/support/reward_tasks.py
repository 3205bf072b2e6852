"""Tasks for reward tests and benchmarks, built from live seed state (real ids, never invented).

Each builder runs the ground truth once on a fresh session of the seed, so ids produced along
the way (a transfer's transaction id) are the ones a replay on a fork produces too.
"""

from __future__ import annotations

from functools import lru_cache

from prove_core.env.runtime import ServerRuntime
from prove_core.model import Example, GroundTruthCall, Message, Task, ToolCall
from prove_core.plugin.manager import Plugins


@lru_cache(maxsize=1)
def plugins() -> Plugins:
    return Plugins().load(autoload=False)


def registry():
    return plugins().registry


def runtime(name: str, seed: int = 0) -> tuple[ServerRuntime, str]:
    rt = ServerRuntime(registry().load("servers", name), seed=seed)
    return rt, rt.new_session()


def _run(rt: ServerRuntime, sid: str, tool: str, args: dict) -> dict:
    result = rt.call(sid, tool, args)
    assert not result.is_error, (tool, args, result.error)
    return result.data


def _customer_with_savings(rt: ServerRuntime, sid: str) -> tuple[dict, dict, dict]:
    state = rt.state(sid)
    for customer in state.customers.all():
        accounts = state.accounts.where(customer_id=customer["id"], status="active")
        checking = [a for a in accounts if a["type"] == "checking" and a["balance"] > 500]
        savings = [a for a in accounts if a["type"] == "savings"]
        if checking and savings:
            return customer, checking[0], savings[0]
    raise LookupError("seed has no customer with a funded checking and a savings account")


@lru_cache(maxsize=4)
def banking_transfer_task(seed: int = 0) -> Task:
    """find_customers -> list_accounts -> transfer_between_accounts -> get_transaction (4 calls)."""
    rt, sid = runtime("banking", seed)
    customer, checking, savings = _customer_with_savings(rt, sid)
    query = customer["name"].split()[-1]
    transfer_args = {"customer_id": customer["id"], "from_account_id": checking["id"], "to_account_id": savings["id"],
                     "amount": 25.0}
    calls = [
        GroundTruthCall(id="find", tool="find_customers", arguments={"query": query}),
        GroundTruthCall(id="accounts", tool="list_accounts", arguments={"customer_id": customer["id"]}, depends_on=["find"]),
        GroundTruthCall(id="transfer", tool="transfer_between_accounts", arguments=transfer_args,
                        depends_on=["find", "accounts"]),
    ]
    for call in calls:
        data = _run(rt, sid, call.tool, call.arguments)
    calls.append(GroundTruthCall(id="receipt", tool="get_transaction", arguments={"transaction_id": data["transaction_id"]},
                                 depends_on=["transfer"]))
    fresh = rt.new_session()
    return Task(servers=["banking"], seed=seed, calls=calls, initial_state_hash=f"banking:{rt.state_hash(fresh)}",
                meta={"query": f"Move $25 from checking to savings for {customer['name']} and show me the receipt."})


@lru_cache(maxsize=4)
def banking_balance_task(seed: int = 0) -> Task:
    """find_customers -> list_accounts -> get_balance: 3 read calls (the benchmark's rollouts)."""
    rt, sid = runtime("banking", seed)
    customer, checking, _ = _customer_with_savings(rt, sid)
    return Task(servers=["banking"], seed=seed, calls=[
        GroundTruthCall(id="find", tool="find_customers", arguments={"query": customer["name"].split()[-1]}),
        GroundTruthCall(id="accounts", tool="list_accounts", arguments={"customer_id": customer["id"]}, depends_on=["find"]),
        GroundTruthCall(id="balance", tool="get_balance", arguments={"account_id": checking["id"]}, depends_on=["accounts"]),
    ])


@lru_cache(maxsize=4)
def shopping_cart_task(seed: int = 0) -> Task:
    """search_products -> get_product -> add_to_cart: 3 calls, one write (the benchmark's rollouts)."""
    return Task(servers=["shopping"], seed=seed, calls=shopping_checkout_task(seed).calls[:3])


@lru_cache(maxsize=4)
def shopping_checkout_task(seed: int = 0) -> Task:
    """search -> product -> add to cart, addresses, cards -> checkout (6 calls, a fan-in)."""
    rt, sid = runtime("shopping", seed)
    found = _run(rt, sid, "search_products", {"category": "books", "in_stock_only": True})
    product = next(p for p in found["products"] if not p.get("sizes"))
    addresses = _run(rt, sid, "list_addresses", {})["addresses"]
    cards = _run(rt, sid, "list_payment_methods", {})["payment_methods"]
    address = next(a for a in addresses if a["is_default"])
    card = next(c for c in cards if not c["expired"])
    calls = [
        GroundTruthCall(id="search", tool="search_products", arguments={"category": "books", "in_stock_only": True}),
        GroundTruthCall(id="product", tool="get_product", arguments={"product_id": product["id"]}, depends_on=["search"]),
        GroundTruthCall(id="cart", tool="add_to_cart", arguments={"product_id": product["id"], "quantity": 1},
                        depends_on=["product"]),
        GroundTruthCall(id="addresses", tool="list_addresses", arguments={}),
        GroundTruthCall(id="cards", tool="list_payment_methods", arguments={}),
        GroundTruthCall(id="order", tool="checkout", arguments={"address_id": address["id"], "payment_method_id": card["id"]},
                        depends_on=["cart", "addresses", "cards"]),
    ]
    check, sid2 = runtime("shopping", seed)
    for call in calls:  # the ground truth must succeed on a fresh seed session
        _run(check, sid2, call.tool, call.arguments)
    return Task(servers=["shopping"], seed=seed, calls=calls)


def example_for(task: Task, example_id: str = "ex-1") -> Example:
    """A training example for ``task``: a user turn, then the ground truth as one assistant turn
    per call, with the server's tools offered."""
    rt, _ = runtime(task.servers[0], task.seed)
    messages = [Message(role="system", content="You are a helpful assistant."),
                Message(role="user", content=task.meta.get("query", "Please help me with my account."))]
    for call in task.calls:
        messages.append(Message(role="assistant", tool_calls=[ToolCall(id=call.id, name=call.tool, arguments=call.arguments)]))
        messages.append(Message(role="tool", tool_call_id=call.id, content="{}"))
    messages.append(Message(role="assistant", content="Done."))
    return Example(id=example_id, messages=messages, tools=[s.to_openai() for s in rt.specs()], task=task)
