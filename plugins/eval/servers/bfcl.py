"""BFCL's multi-turn backends (the ``bfcl-eval`` package) as PROVE servers.

The Berkeley Function Calling Leaderboard ships eight executable Python classes (a file system,
messaging, posting, tickets, trading, travel booking, vehicle control, math) that its multi-turn
categories run against. Each becomes a server named ``bfcl_<module>`` (``bfcl_gorilla_file_system``,
...), so BFCL environments can be served over MCP, audited, synthesized from and trained on
like ours. Nothing is copied: the tools are BFCL's own function docs, the state is an instance of
BFCL's own class, and a call runs BFCL's own method (see ``prove_plugins.eval.servers.wrapped``).

**Seeds are scenarios.** Session seed ``n`` is the initial configuration BFCL gives this class
in entry ``n`` of the options' ``category`` (``base``, ``miss_func``, ``miss_param``,
``long_context``): ``multi_turn_base_17`` starts from seed 17. A class the entry does not use
starts from its default scenario. ``long_context`` loads BFCL's long-context scenarios.

A method that reports ``{"error": ...}`` becomes a typed ``FAILED_PRECONDITION`` error
(reason ``BFCL_ERROR``); one that raises becomes ``FAILED_PRECONDITION`` (reason
``BFCL_EXCEPTION``); in both the message is BFCL's text. Install: ``pip install --no-deps
bfcl-eval`` and the ``eval`` extra (docs/evaluation.md).
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import os
import tempfile
from typing import Any

import attrs

from prove_core.errors import FailedPrecondition, ProveError
from prove_plugins.eval.servers import BFCL_CATEGORIES, BFCL_SERVERS, bfcl_available
from prove_plugins.eval.servers.wrapped import ObjectServer, WrappedTool, fingerprint_of_attributes

CATEGORIES = BFCL_CATEGORIES
SERVERS = BFCL_SERVERS
CLASS_TO_SERVER = {cls: name for name, cls in SERVERS.items()}
# Attributes that hold wall-clock time (set with datetime.now()), left out of the fingerprint.
VOLATILE = ("_last_modified",)
# BFCL's function docs carry no read/write metadata; these names only read (a call still runs on
# a copy, so a wrong entry could only make an annotation untruthful, never leak state).
_READ_PREFIXES = ("get_", "list_", "search_", "view_", "display", "check_", "estimate_", "compute_", "retrieve_",
                  "filter_", "find_")
_READ_NAMES = {"cat", "diff", "du", "grep", "ls", "pwd", "tail", "wc", "sort", "gallon_to_liter", "liter_to_gallon",
               "verify_traveler_information", "notify_price_change", "message_get_login_status",
               "posting_get_login_status", "ticket_get_login_status", "trading_get_login_status",
               "travel_get_login_status"}
# named like reads, but they draw from the backend's random generator or record what they did
_WRITES_DESPITE_NAME = {"get_current_speed", "get_outside_temperature_from_google",
                        "get_outside_temperature_from_weather_com", "get_flight_cost"}
INSTALL_HINT = ("BFCL needs the bfcl-eval package: pip install --no-deps bfcl-eval && pip install -e '.[eval]' "
                "(docs/evaluation.md)")


available = bfcl_available


def require_bfcl() -> None:
    """Import-time setup for bfcl-eval, or a ``ProveError`` that says how to install it."""
    # bfcl-eval writes lock files and result folders under BFCL_PROJECT_ROOT (by default inside
    # site-packages); keep them out of the installed package.
    os.environ.setdefault("BFCL_PROJECT_ROOT", os.path.join(tempfile.gettempdir(), "prove-bfcl"))
    if not available():
        raise ProveError(INSTALL_HINT)
    try:
        importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
        importlib.import_module("bfcl_eval.model_handler.utils")
    except ImportError as exc:
        raise ProveError(f"bfcl-eval is installed but cannot be imported ({exc}); {INSTALL_HINT}") from None


@attrs.frozen(kw_only=True)
class BfclOptions:
    """Which BFCL category's scenarios the seeds index."""

    category: str = attrs.field(default="base", validator=attrs.validators.in_(CATEGORIES))


# -- BFCL data, loaded once per process ----------------------------------------------------------


@functools.cache
def entries(category: str) -> tuple[dict[str, Any], ...]:
    """BFCL's test entries of ``multi_turn_<category>`` (function docs filled in, held-out
    functions of ``miss_func`` moved to ``missed_function``), as BFCL's own loader gives them."""
    require_bfcl()
    from bfcl_eval.utils import load_dataset_entry

    return tuple(load_dataset_entry(f"multi_turn_{category}"))


@functools.cache
def ground_truth(category: str) -> dict[str, list[list[str]]]:
    """Entry id -> BFCL's ground truth: per user turn, the calls as Python call strings."""
    require_bfcl()
    from bfcl_eval.utils import load_ground_truth_entry

    return {g["id"]: g["ground_truth"] for g in load_ground_truth_entry(f"multi_turn_{category}")}


@functools.cache
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    require_bfcl()
    from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.utils import load_file

    return tuple(load_file(MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name], use_lock=False))


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs in OpenAI function format, converted by BFCL's own converter (what its
    OpenAI function-calling handler sends)."""
    require_bfcl()
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool

    return convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)


def parse_call(text: str, classes: list[str] = ()) -> tuple[str, dict[str, Any]]:
    """``"cd(folder='document')"`` -> ``("cd", {"folder": "document"})`` (BFCL ground truth).
    Positional arguments (``"sort('a.txt')"``) are named after the method's signature in the
    first of ``classes`` that has it."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a function call: {text!r}")
    name = node.func.id
    arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    if node.args:
        names = next((parameter_names(c, name) for c in reversed(list(classes)) if parameter_names(c, name)), [])
        if len(names) < len(node.args):
            raise ValueError(f"cannot name the positional arguments of {text!r}")
        arguments = {**{n: ast.literal_eval(a) for n, a in zip(names, node.args)}, **arguments}
    return name, arguments


@functools.cache
def parameter_names(class_name: str, method: str) -> list[str]:
    """The parameter names of a BFCL class's method, in order ([] when it has no such method)."""
    import inspect

    require_bfcl()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
    fn = getattr(cls, method, None)
    if fn is None or method.startswith("_"):
        return []
    return [p for p in inspect.signature(fn).parameters if p != "self"]


# -- the servers -----------------------------------------------------------------------------------


def _strict_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema (already in OpenAPI types) as a PROVE tool schema: closed to
    unknown keys, every parameter described, defaults moved into the description (a validator
    would otherwise inject them, and BFCL writes some Python defaults as strings)."""
    schema = copy.deepcopy(parameters)
    schema["type"] = "object"
    schema["additionalProperties"] = False
    schema.setdefault("required", [])
    properties = schema.setdefault("properties", {})
    for name, prop in properties.items():
        description = str(prop.get("description") or name.replace("_", " "))
        if "default" in prop:
            description += f" Default: {prop.pop('default')!r}."
        prop["description"] = description
    schema.pop("optional", None)
    return schema


def _instance(class_name: str, category: str, seed: int) -> Any:
    require_bfcl()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
    instance = cls()
    if class_name not in STATELESS_CLASSES:
        scenario = {}
        found = entries(category)
        if found:
            entry = found[seed % len(found)]
            scenario = entry.get("initial_config", {}).get(class_name, {})
        instance._load_scenario(copy.deepcopy(scenario), long_context=category == "long_context")
    return instance


def _caller(method: str) -> Any:
    def call(obj: Any, /, **arguments: Any) -> Any:
        try:
            result = getattr(obj, method)(**arguments)
        except Exception as exc:  # BFCL reports these to the model as "Error during execution: ..."
            raise FailedPrecondition(str(exc), reason="BFCL_EXCEPTION") from None
        if isinstance(result, dict) and set(result) == {"error"}:
            raise FailedPrecondition(str(result["error"]), reason="BFCL_ERROR")
        return result

    return call


def is_read_only(class_name: str, method: str) -> bool:
    if method in _WRITES_DESPITE_NAME:
        return False
    return class_name == "MathAPI" or method in _READ_NAMES or method.startswith(_READ_PREFIXES)


@functools.cache
def _example_source(class_name: str, method: str) -> tuple[str, int, list[tuple[str, dict[str, Any]]], dict[str, Any]] | None:
    """Where BFCL's ground truth first calls ``method`` successfully: (category, entry index, this
    class's calls before it in that entry, the call's arguments); ``None`` when it never does."""
    methods = {doc["name"] for doc in function_docs(class_name)}
    for category in ("base", "miss_param", "miss_func"):
        for index, entry in enumerate(entries(category)):
            if class_name not in entry["involved_classes"]:
                continue
            texts = [c for turn in ground_truth(category)[entry["id"]] for c in turn]
            calls = [call for call in (parse_call(t, entry["involved_classes"]) for t in texts) if call[0] in methods]
            for position, (name, arguments) in enumerate(calls):
                if name != method:
                    continue
                try:
                    _caller(method)(_prepared(class_name, category, index, calls[:position]), **arguments)
                except Exception:  # noqa: BLE001 - this occurrence fails on replay; look further
                    continue
                return category, index, calls[:position], arguments
    return None


def _prepared(class_name: str, category: str, index: int, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    instance = _instance(class_name, category, index)
    for name, arguments in calls:
        try:
            _caller(name)(instance, **arguments)
        except Exception:  # noqa: BLE001 - the ground truth's own failed steps stay failed
            pass
    return instance


def _example(class_name: str, method: str) -> Any:
    """An example for the conformance kit: it prepares the session's state the way BFCL's ground
    truth does before it first calls ``method`` (the entry's scenario and this class's earlier
    calls), then gives that call's arguments."""

    def example(state: Any) -> dict[str, Any]:
        from prove_plugins.eval.servers.wrapped import BACKEND, Opaque

        source = _example_source(class_name, method)
        if source is None:
            return {}
        category, index, before, arguments = source
        prepared = _prepared(class_name, category, index, before)
        state.set_var(BACKEND, Opaque(prepared, state.get_var(BACKEND)._fingerprint_of))
        return dict(arguments)

    return example


def build_server(name: str) -> ObjectServer:
    class_name = SERVERS[name]
    docs = function_docs(class_name)
    tools = [
        WrappedTool(name=tool["function"]["name"], description=tool["function"]["description"],
                    parameters=_strict_schema(tool["function"]["parameters"]), call=_caller(tool["function"]["name"]),
                    read_only=False, examples=(_example(class_name, tool["function"]["name"]),))
        for tool in openai_tools(list(docs))
    ]
    # Every call runs on a copy (read_only=False above): the annotation below is documentation.
    server = ObjectServer(
        name=name, domain="bfcl", module=__name__,
        description=f"BFCL multi-turn backend {class_name} (bfcl-eval); seed n = entry n's scenario.",
        build=lambda seed, options: _instance(class_name, options.category, seed),
        tools=tools, fingerprint=fingerprint_of_attributes(VOLATILE), options=BfclOptions, benchmark=True,
    )
    for tool in server.tools.values():
        if is_read_only(class_name, tool.name):
            tool.spec = attrs.evolve(tool.spec, annotations=attrs.evolve(tool.spec.annotations, read_only=True,
                                                                         idempotent=True))
    return server


if available():
    # Module attributes, so the conformance kit finds each server in a fresh process.
    globals().update({name: build_server(name) for name in SERVERS})
