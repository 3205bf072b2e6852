"""Registers the benchmark environments as servers: BFCL's multi-turn backends (``bfcl_*``) and
τ²-bench's domains (``tau2_*``), each only when its package is installed.

This plugin is advertised through the ``prove.plugins`` entry point (name ``benchmarks``) rather
than the bundled list, so ``PROVE_DISABLE_PLUGIN_AUTOLOAD=1`` or ``PROVE_BLOCK_PLUGINS=benchmarks``
leave them out, and the catalog of our own 20 servers stays the same whatever is installed.
Registration is lazy: listing plugins imports neither package.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from prove_core import hookimpl

# server name -> BFCL class (bfcl_eval's CLASS_FILE_PATH_MAPPING names its module)
BFCL_SERVERS = {
    "bfcl_gorilla_file_system": "GorillaFileSystem",
    "bfcl_math_api": "MathAPI",
    "bfcl_message_api": "MessageAPI",
    "bfcl_posting_api": "TwitterAPI",
    "bfcl_ticket_api": "TicketAPI",
    "bfcl_trading_bot": "TradingBot",
    "bfcl_travel_booking": "TravelAPI",
    "bfcl_vehicle_control": "VehicleControlAPI",
}
BFCL_CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
# server name -> τ²-bench domain (telecom needs user-side device tools: not served)
TAU2_SERVERS = {"tau2_airline": "airline", "tau2_retail": "retail", "tau2_mock": "mock"}
TAU2_DOMAINS = tuple(TAU2_SERVERS.values())


def bfcl_available() -> bool:
    return importlib.util.find_spec("bfcl_eval") is not None


def tau2_available() -> bool:
    return importlib.util.find_spec("tau2") is not None


@hookimpl
def prove_register_servers(register: Any) -> None:
    if bfcl_available():
        for name, cls in BFCL_SERVERS.items():
            register(f"prove_plugins.eval.servers.bfcl:{name}", name=name, summary=f"BFCL multi-turn backend {cls}")
    if tau2_available():
        for name, domain in TAU2_SERVERS.items():
            register(f"prove_plugins.eval.servers.tau2:{name}", name=name, summary=f"τ²-bench {domain} domain")
