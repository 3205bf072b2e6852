"""A tiny server for core tests: one table, a read, a write with a business rule, a crash."""

from __future__ import annotations

import time
from typing import Annotated, Literal

import attrs
from pydantic import Field

from prove_core.toolkit import Server, State, Table, fake, money, ref, require


class WalletState(State):
    wallets = Table("wallet", prefix="wal")


@attrs.frozen(kw_only=True)
class WalletOptions:
    wallets: int = attrs.field(default=3, validator=attrs.validators.gt(0))


def build_wallets(rng, options: WalletOptions) -> WalletState:
    state = WalletState(salt=str(rng.random()))
    for _ in range(options.wallets):
        state.wallets.insert({"owner": fake.full_name(rng), "balance": fake.money(rng, 10, 100), "kind": "personal"})
    return state


server = Server("wallet", domain="test", description="Wallets for core tests.", state=WalletState,
                seed=build_wallets, options=WalletOptions)


@server.tool(read_only=True, reads=["wallet"], examples=[{}])
def list_wallets(state: WalletState, kind: Annotated[Literal["personal", "business"] | None,
                                                     Field(description="Filter by kind.")] = None) -> dict:
    """All wallets."""
    return {"wallets": state.wallets.where(**({"kind": kind} if kind else {}))}


@server.tool(mutates=["wallet"], errors=["INSUFFICIENT_FUNDS"],
             examples=[lambda s: {"wallet_id": s.wallets.first()["id"], "amount": 1.5}])
def spend(state: WalletState, wallet_id: Annotated[str, ref("wallet", "Wallet to debit.")],
          amount: Annotated[float, Field(gt=0, le=10_000, description="Amount in USD.")]) -> dict:
    """Debit a wallet; fails with INSUFFICIENT_FUNDS."""
    wallet = state.wallets.get(wallet_id)
    # Write first, check after: the executor must roll the write back when the rule fails.
    state.wallets.update(wallet_id, balance=money(wallet["balance"] - amount))
    require(wallet["balance"] >= amount, "not enough money", reason="INSUFFICIENT_FUNDS")
    return state.wallets.get(wallet_id)


@server.tool(mutates=["wallet"], examples=[lambda s: {"wallet_id": s.wallets.first()["id"]}])
def explode(state: WalletState, wallet_id: Annotated[str, ref("wallet", "Wallet to corrupt.")]) -> dict:
    """A tool with a bug: it writes, then crashes."""
    state.wallets.update(wallet_id, balance=-1.0)
    raise ZeroDivisionError("bug in tool")


@server.tool(mutates=["wallet"], examples=[lambda s: {"wallet_id": s.wallets.first()["id"], "seconds": 0.0}])
def slow_spend(state: WalletState, wallet_id: Annotated[str, ref("wallet", "Wallet to debit.")],
               seconds: Annotated[float, Field(ge=0, le=5, description="How long the bank takes.")]) -> dict:
    """Debit one dollar, then wait: a tool that can overrun a deadline after writing."""
    wallet = state.wallets.get(wallet_id)
    state.wallets.update(wallet_id, balance=money(wallet["balance"] - 1))
    time.sleep(seconds)
    return state.wallets.get(wallet_id)
