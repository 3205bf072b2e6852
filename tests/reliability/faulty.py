"""A server whose tools misbehave on purpose: they raise, exit, hang, spin, and write in two
steps with a pause between, so the fault tests can hit a call half-way through.

Two accounts, ``alpha`` and ``beta``, hold 100.0 each; every tool that moves money keeps the
total at 200.0, so a half-applied move shows up as a total that is off.
"""

from __future__ import annotations

import threading
import time
from typing import Annotated, Literal

from pydantic import Field

from prove_core.toolkit import Server, State, Table, money, require

START_BALANCE = 100.0

Crash = Literal["runtime", "recursion", "assertion", "memory", "system_exit", "keyboard_interrupt", "generator_exit"]


class VaultState(State):
    accounts = Table("account", prefix="acct")


def build_vault(rng, options) -> VaultState:
    state = VaultState(salt=str(rng.random()))
    for name in ("alpha", "beta"):
        state.accounts.insert({"id": name, "balance": START_BALANCE})
    return state


server = Server("faulty", domain="test", description="Tools that fail on purpose, for the fault tests.",
                state=VaultState, seed=build_vault)

# Set by a test to release every `hang` call (the deadline must fire long before).
RELEASE = threading.Event()


@server.tool(read_only=True, reads=["account"], examples=[{}])
def balances(state: VaultState) -> dict:
    """Both balances and their total."""
    accounts = {a["id"]: a["balance"] for a in state.accounts.all()}
    return {"accounts": accounts, "total": money(sum(accounts.values()))}


def _debit_then_credit(state: VaultState, amount: float, pause_s: float) -> None:
    alpha, beta = state.accounts.get("alpha"), state.accounts.get("beta")
    require(alpha["balance"] >= amount, "not enough money", reason="INSUFFICIENT_FUNDS")
    state.accounts.update("alpha", balance=money(alpha["balance"] - amount))
    time.sleep(pause_s)  # the money is out of alpha and not yet in beta
    state.accounts.update("beta", balance=money(beta["balance"] + amount))


@server.tool(mutates=["account"], errors=["INSUFFICIENT_FUNDS"], examples=[{"amount": 1.0, "pause_s": 0.0}])
def move(state: VaultState, amount: Annotated[float, Field(gt=0, le=1000, description="Amount.")],
         pause_s: Annotated[float, Field(ge=0, le=10, description="Pause between debit and credit.")] = 0.0) -> dict:
    """Move money from alpha to beta in two writes with a pause between them."""
    _debit_then_credit(state, amount, pause_s)
    return balances(state)


@server.tool(mutates=["account"], examples=[{"amount": 1.0, "pause_s": 0.0}])
def move_then_fail(state: VaultState, amount: Annotated[float, Field(gt=0, le=1000, description="Amount.")],
                   pause_s: Annotated[float, Field(ge=0, le=10, description="Pause before failing.")] = 0.0) -> dict:
    """Move money, then crash: the whole move must be rolled back."""
    _debit_then_credit(state, amount, pause_s)
    raise RuntimeError("bug after the write")


@server.tool(mutates=["account"], examples=[{"kind": "runtime"}])
def crash(state: VaultState, kind: Annotated[Crash, Field(description="What to raise after writing.")]) -> dict:
    """Write, then raise the named exception."""
    state.accounts.update("alpha", balance=-1.0)
    if kind == "recursion":
        def deeper(n: int) -> int:
            return deeper(n + 1) + 1
        deeper(0)
    exc = {"runtime": RuntimeError("bug"), "assertion": AssertionError("bug"), "memory": MemoryError(),
           "system_exit": SystemExit(3), "keyboard_interrupt": KeyboardInterrupt(),
           "generator_exit": GeneratorExit()}[kind]
    raise exc


@server.tool(mutates=["account"], examples=[{"seconds": 0.0}])
def hang(state: VaultState, seconds: Annotated[float, Field(ge=0, le=3600, description="How long to block.")]) -> dict:
    """Write, then block (until ``seconds`` pass or the test releases it)."""
    state.accounts.update("alpha", balance=0.0)
    RELEASE.wait(seconds)
    return balances(state)


@server.tool(mutates=["account"], examples=[{"seconds": 0.0}])
def spin(state: VaultState, seconds: Annotated[float, Field(ge=0, le=60, description="How long to burn CPU.")]) -> dict:
    """Write, then burn CPU in pure Python for ``seconds``."""
    state.accounts.update("alpha", balance=0.0)
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return {"spins": n}
