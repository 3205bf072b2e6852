"""``prove_plugins.integrations.trl_env``: PROVE servers as TRL's ``environment_factory`` — the generated tool
methods and their schemas, live calls, reuse after reset, drift, the reward, and TRL's real
``GRPOTrainer`` driving it on a tiny random model (CPU)."""

from __future__ import annotations

import copy
import inspect
import json
import os
import typing
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest

from prove_plugins.integrations.trl_env import ProveEnvironment, TaskDrift, prove_environment_factory, rl_dataset, tool_annotation

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROVE_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "array": "array",
               "object": "object"}


# -- fixtures -----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugins():
    from prove_core.plugin.manager import Plugins

    return Plugins().load(autoload=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, plugins) -> Path:
    from prove_core.config import load_experiment
    from prove_core.synth.pipeline import synthesize

    tmp = tmp_path_factory.mktemp("trl_env")
    exp = load_experiment({"name": "c", "output_dir": str(tmp), "servers": [{"name": "banking"}],
                           "synth": {"examples": 8, "plots": False, "exports": [], "cache_dir": str(tmp / "cache")}})
    synthesize(exp, plugins, echo=lambda _: None, progress=False)
    return tmp / "c" / "synth" / "corpus.jsonl"


@pytest.fixture(scope="module")
def rows(corpus) -> list[dict[str, Any]]:
    from prove_core.synth.exporters import rl_rows

    out = list(rl_rows(corpus))
    assert any(r["task"]["expected"] == "call" for r in out) and any(r["task"]["expected"] != "call" for r in out)
    return out


@pytest.fixture(scope="module")
def Banking(plugins) -> type[ProveEnvironment]:
    return prove_environment_factory("banking", plugins=plugins)


@pytest.fixture(scope="module")
def specs(plugins):
    from prove_core.env.runtime import build_runtime

    return {s.name: s for s in build_runtime(plugins.registry.load("servers", "banking")).specs()}


def call_row(rows, *, mutating: bool = False) -> dict[str, Any]:
    for row in rows:
        calls = row["task"]["calls"]
        if row["task"]["expected"] == "call" and (not mutating or any(c["tool"] in MUTATING for c in calls)):
            return row
    raise AssertionError("no such row in the corpus")


MUTATING = {"set_card_frozen", "report_card_lost", "add_payee", "remove_payee", "pay_payee", "verify_payee",
            "transfer_between_accounts", "close_account", "set_card_spending_limit"}


def replay(env: ProveEnvironment, row: dict[str, Any]) -> list[str]:
    """Make the row's ground-truth calls through the generated methods, as TRL does (keywords)."""
    return [getattr(env, c["tool"])(**c["arguments"]) for c in row["task"]["calls"]]


# -- the generated methods ----------------------------------------------------------------------------------------------


def test_trl_sees_exactly_reset_get_reward_and_one_method_per_tool(Banking, specs):
    # TRL's discovery (grpo_trainer.py): public functions of the class; reset and get_reward are special.
    public = {n for n, _ in inspect.getmembers(Banking, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public == set(specs) | {"reset", "get_reward"}
    assert Banking.tool_names() == list(specs)


def test_signatures_are_typed_from_the_json_schema(Banking, specs):
    env = Banking()
    for name, spec in specs.items():
        sig = inspect.signature(getattr(env, name))  # bound, as TRL passes it: no self
        props, required = spec.parameters.get("properties", {}), set(spec.parameters.get("required", []))
        assert list(sig.parameters) == list(props), name
        for pname, param in sig.parameters.items():
            assert param.kind is inspect.Parameter.KEYWORD_ONLY
            schema = props[pname]
            if pname in required:
                assert param.default is inspect.Parameter.empty
                assert param.annotation == tool_annotation(schema)
            else:
                assert param.default == schema.get("default")
                assert param.annotation == (tool_annotation(schema) | None)
        assert sig.return_annotation is str
    sig = inspect.signature(env.list_transactions)
    assert sig.parameters["account_id"].annotation is str
    assert sig.parameters["limit"].annotation == (int | None) and sig.parameters["limit"].default == 20
    assert typing.get_args(sig.parameters["status"].annotation)[0] == Literal["posted", "pending"]
    assert sig.parameters["min_amount"].annotation == (float | None)
    doc = inspect.getdoc(env.list_transactions)
    assert doc.startswith(specs["list_transactions"].description.strip()) and "\nArgs:\n" in doc
    assert "    account_id: Id of the account (acc_...), from list_accounts." in doc


def test_json_schema_types_map_to_python_types():
    assert tool_annotation({"type": "string"}) is str
    assert tool_annotation({"type": "array", "items": {"type": "integer"}}) == list[int]
    assert tool_annotation({"type": "array"}) is list
    assert tool_annotation({"type": "object", "additionalProperties": {"type": "number"}}) == dict[str, float]
    assert tool_annotation({"type": "object", "properties": {"a": {"type": "string"}}}) is dict
    assert tool_annotation({"type": ["string", "null"]}) == (str | None)
    assert tool_annotation({"enum": ["a", "b"], "type": "string"}) == Literal["a", "b"]
    door = tool_annotation({"anyOf": [{"enum": ["front", "rear"], "type": "string"}, {"const": "all", "type": "string"}]})
    assert typing.get_args(door) == (Literal["front", "rear"], Literal["all"])
    assert tool_annotation({}) is Any


def test_transformers_schema_extraction_gives_back_the_prove_schema(Banking, specs):
    """What TRL renders into the prompt (transformers' get_json_schema on the bound method) is the
    PROVE tool: same name, description, parameters, required ones, types, enums and descriptions.
    Only what Python type hints cannot say is lost (bounds, patterns, entity tags), and optional
    parameters are marked nullable (None = not given)."""
    from transformers.utils import get_json_schema

    env = Banking()
    for name, spec in specs.items():
        got = get_json_schema(getattr(env, name))
        assert set(got) == {"type", "function"} and got["type"] == "function"
        fn = got["function"]
        assert set(fn) == {"name", "description", "parameters"}, name  # no "return": the schema stays PROVE's
        assert fn["name"] == name and fn["description"] == spec.description.strip()
        props, required = spec.parameters["properties"], spec.parameters.get("required", [])
        assert sorted(fn["parameters"].get("required", [])) == sorted(required), name
        assert list(fn["parameters"]["properties"]) == list(props), name
        for pname, schema in props.items():
            mine = fn["parameters"]["properties"][pname]
            assert mine["description"] == schema["description"], (name, pname)
            assert mine["type"] == PROVE_TYPES[schema["type"]], (name, pname)
            assert mine.get("enum") == schema.get("enum"), (name, pname)
            assert mine.get("nullable", False) is (pname not in required), (name, pname)
            if schema["type"] == "array":
                assert mine["items"]["type"] == schema["items"]["type"]


def test_trl_renders_the_tools_into_the_prompt(Banking, specs):
    """The same call TRL makes (apply_chat_template with the bound methods as tools) works."""
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = tiny_tokenizer_for(["hello world"])
    tokenizer.chat_template = qwen2_5_chat_template
    env = Banking()
    methods = [getattr(env, n) for n in Banking.tool_names()]
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=methods, tokenize=False,
                                         add_generation_prompt=True)
    for name in specs:
        assert f'"name": "{name}"' in text
    assert json.dumps(specs["get_balance"].parameters["properties"]["account_id"]["description"]) in text


def test_several_servers_publish_prefixed_tool_methods(plugins):
    Both = prove_environment_factory(["banking", "payments"], plugins=plugins)
    names = Both.tool_names()
    assert "banking_get_balance" in names and any(n.startswith("payments_") for n in names)
    assert all(callable(getattr(Both, n)) for n in names)


# -- live calls, reuse, drift ---------------------------------------------------------------------------------------------


def test_calls_run_on_the_instances_own_live_session_and_errors_come_back_as_text(Banking, rows):
    row = call_row(rows, mutating=True)
    env = Banking()
    assert env.reset(**row) is None  # nothing appended to the prompt
    seed_hash = env.state_hash
    outputs = replay(env, row)
    assert all(isinstance(o, str) for o in outputs)
    assert [json.loads(o).get("code") for o in outputs] == [None] * len(outputs)  # the ground truth succeeds
    assert env.state_hash != seed_hash  # a mutating call changed this session
    assert [c.name for c in env.calls] == [c["tool"] for c in row["task"]["calls"]]
    assert [c.arguments for c in env.calls] == [c["arguments"] for c in row["task"]["calls"]]

    # Errors are returned (typed), not raised, and are part of the rollout.
    missing = json.loads(env.get_balance(account_id="acc_doesnotexist"))
    assert missing["code"] == "NOT_FOUND"
    unknown_key = json.loads(env.get_balance(account_id="acc_x", colour="blue"))
    assert unknown_key["reason"] == "SCHEMA_VIOLATION" and "colour" in unknown_key["message"]
    assert env.calls[-1].arguments == {"account_id": "acc_x", "colour": "blue"}
    # None for an optional parameter means "not given".
    customer = row["task"]["calls"][0]["arguments"].get("customer_id") or "cus_x"
    env.list_accounts(customer_id=customer, status=None)
    assert env.calls[-1].arguments == {"customer_id": customer}
    assert len(env.calls) == len(row["task"]["calls"]) + 3 == len(env.results)

    other = Banking()  # instances never share a session
    other.reset(**row)
    assert other.session_id != env.session_id and other.state_hash == seed_hash and other.calls == ()


def test_a_tool_the_row_does_not_offer_is_not_run(Banking, rows):
    row = copy.deepcopy(call_row(rows, mutating=True))
    hidden = row["task"]["calls"][-1]["tool"]
    row["tools"] = [t for t in row["tools"] if t["function"]["name"] != hidden]
    env = Banking()
    env.reset(**row)
    before = env.state_hash
    out = json.loads(getattr(env, hidden)(**row["task"]["calls"][-1]["arguments"]))
    assert out["code"] == "UNKNOWN_TOOL" and out["reason"] == "UNKNOWN_TOOL"
    assert env.state_hash == before and env.calls[-1].name == hidden
    assert hidden not in {t["function"]["name"] for t in env.rollout.tools}


def test_reset_on_a_reused_instance_starts_clean(Banking, rows):
    from prove_core.env.drift import state_matches
    from prove_core.model import Task, from_json

    row = call_row(rows, mutating=True)
    task = from_json(row["task"], Task)
    runtime = Banking._prove.environments(task).runtimes["banking"]
    env = Banking()
    env.reset(**row)
    first = env.session_id
    replay(env, row)
    dirty = env.state_hash
    assert not state_matches(task.initial_state_hash, dirty)
    assert env.reward_result.total > 0
    open_before = len(runtime)

    env.reset(**row)  # TRL reuses the instance for the next batch
    assert env.session_id != first and first not in runtime  # the old session is closed
    assert len(runtime) == open_before  # one closed, one opened: nothing leaks
    assert state_matches(task.initial_state_hash, env.state_hash)  # back to the seed
    assert env.calls == () and env.results == () and env.rollout.attempts == ()
    assert env.reward_result.total < 0.5  # scored afresh: no calls yet

    abstain = next(r for r in rows if r["task"]["expected"] != "call")
    env.reset(**abstain)  # and to another task
    assert env.task.expected == abstain["task"]["expected"] and env.calls == ()


def test_a_drifted_row_fails_loudly_and_leaks_no_session(Banking, rows):
    from prove_core.model import Task, from_json

    row = call_row(rows)
    runtime = Banking._prove.environments(from_json(row["task"], Task)).runtimes["banking"]
    env = Banking()
    open_before = len(runtime)

    schema = copy.deepcopy(row)
    schema["task"]["meta"]["schema_hash"] = "0" * 20
    with pytest.raises(TaskDrift) as info:
        env.reset(**schema)
    assert info.value.what == "schema"

    state = copy.deepcopy(row)
    state["task"]["initial_state_hash"] = "banking:" + "0" * 16
    with pytest.raises(TaskDrift) as info:
        env.reset(**state)
    assert info.value.what == "state"
    assert len(runtime) == open_before and env.session_id is None

    with pytest.raises(Exception, match="reset"):
        env.get_balance(account_id="acc_x")  # no episode: a programming error, raised
    env.reset(**row)  # the instance still works
    assert env.calls == ()


def test_a_row_for_other_servers_is_refused(Banking, rows):
    row = copy.deepcopy(call_row(rows))
    row["task"]["servers"] = ["payments"]
    with pytest.raises(Exception, match="build one class per set of servers"):
        Banking().reset(**row)


# -- the reward ---------------------------------------------------------------------------------------------------------------


def test_the_ground_truth_earns_more_than_no_calls_or_wrong_calls(Banking, rows, plugins):
    from prove_core.model import Task, from_json
    from prove_core.reward.core import Rollout, build_reward

    row = call_row(rows)
    truth, idle, wrong = Banking(), Banking(), Banking()
    for env in (truth, idle, wrong):
        env.reset(**row)
    replay(truth, row)
    wrong.get_balance(account_id="acc_doesnotexist")
    wrong.list_payees(customer_id="cus_nobody")
    totals = {n: e.get_reward() for n, e in (("truth", truth), ("idle", idle), ("wrong", wrong))}
    assert totals["truth"] > totals["wrong"] and totals["truth"] > totals["idle"]
    assert totals["truth"] == pytest.approx(truth.reward_result.best)
    # The same number PROVE gives the ground truth itself.
    reference = build_reward(None, plugins.registry).score(Rollout.ground_truth(from_json(row["task"], Task),
                                                                                tools=row["tools"]))
    assert totals["truth"] == pytest.approx(reference.total)
    assert set(truth.scores) == set(reference.scores) and truth.scores["validity"] == 1.0
    assert wrong.scores["validity"] < 1.0

    abstain = next(r for r in rows if r["task"]["expected"] == "abstain")
    quiet, busy = Banking(), Banking()
    quiet.reset(**abstain)
    busy.reset(**abstain)
    busy.find_customers(query="somebody")
    assert quiet.get_reward() > busy.get_reward()


def test_the_reward_function_form_reads_the_reply_and_logs_every_component(plugins, rows):
    from prove_core.reward.core import build_reward

    Env = prove_environment_factory("banking", plugins=plugins, reward_source="function", name="WithReply")
    assert "get_reward" not in dict(inspect.getmembers(Env, predicate=inspect.isfunction))
    (prove,) = Env.reward_functions()
    assert prove.__name__ == "prove"
    row, abstain = call_row(rows), next(r for r in rows if r["task"]["expected"] == "abstain")
    envs = [Env(), Env(), Env()]
    envs[0].reset(**row)
    replay(envs[0], row)
    envs[1].reset(**row)
    envs[2].reset(**abstain)
    completions = [[{"role": "assistant", "content": "", "tool_calls": []}, {"role": "assistant", "content": "Done."}],
                   [{"role": "assistant", "content": "Hello."}],
                   [{"role": "assistant", "content": "Sorry, I can't help with that: none of my tools can."}]]
    metrics: dict[str, float] = {}
    extra: dict[str, list[Any]] = {}
    totals = prove(prompts=[], completions=completions, environments=envs, log_metric=metrics.__setitem__,
                   log_extra=extra.__setitem__, trainer_state=None)
    assert totals == pytest.approx([e.reward_result.total for e in envs])
    assert totals[0] > totals[1]
    assert [e.rollout.content for e in envs] == [c[-1]["content"] for c in completions]
    names = [c.name for c in build_reward(None, plugins.registry).components]
    assert set(extra) == {f"prove/{n}" for n in names} and all(len(v) == 3 for v in extra.values())
    assert extra["prove/abstention"][:2] == [None, None] and extra["prove/validity"][2] is None  # where they apply
    applied = [v for v in extra["prove/validity"] if v is not None]
    assert metrics["prove/validity"] == pytest.approx(sum(applied) / len(applied))
    # The reply counts: the decline earns honest_reply, which get_reward (no reply to read) cannot give.
    assert extra["prove/honest_reply"][2] == 1.0
    plain = prove_environment_factory("banking", plugins=plugins)
    assert plain.reward_functions() == []
    same = plain()
    same.reset(**abstain)
    assert same.scores["honest_reply"] == 0.0 and same.get_reward() < totals[2]


# -- TRL's GRPOTrainer ---------------------------------------------------------------------------------------------------------


def tiny_tokenizer_for(texts):
    from prove_plugins.train.models.tiny import train_tokenizer

    return train_tokenizer(texts, vocab_size=1024)


@pytest.fixture(scope="module")
def tiny(corpus):
    """A tokenizer trained on the corpus, with the Qwen2.5 chat template TRL knows how to parse
    (its <tool_call> JSON), and a tiny random model."""
    pytest.importorskip("trl")
    from trl.chat_template_utils import qwen2_5_chat_template

    from prove_core.model import read_jsonl
    from prove_plugins.train.models.tiny import corpus_texts

    tokenizer = tiny_tokenizer_for(corpus_texts(list(read_jsonl(corpus))))
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def counting(base: type[ProveEnvironment], log: Counter) -> type[ProveEnvironment]:
    """``base`` with every instance, reset, tool call and reward counted (no new public method)."""

    class Counted(base):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            log["instances"] += 1

        def reset(self, **row: Any) -> str | None:
            log["resets"] += 1
            log[f"row:{row['id']}"] += 1
            return super().reset(**row)

        def _call_tool(self, tool: str, arguments: dict[str, Any]) -> str:
            log["tool_calls"] += 1
            return super()._call_tool(tool, arguments)

        def _score(self) -> Any:
            if self._result is None:
                log["scored"] += 1
            return super()._score()

    if hasattr(base, "get_reward"):
        def get_reward(self: Any) -> float:
            log["get_reward"] += 1
            return base.get_reward(self)

        Counted.get_reward = get_reward  # type: ignore[attr-defined]
    return Counted


def grpo_args(out: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=4, max_steps=2,
                      learning_rate=1e-3, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
                      save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0, **kw)


def test_grpo_trainer_resets_a_pooled_environment_per_rollout_and_logs_the_reward(tmp_path, tiny, corpus, Banking):
    """TRL's real loop with the tiny model generating (random text: its tool calls rarely parse)."""
    from trl import GRPOTrainer

    from prove_plugins.train.models.tiny import build_tiny_model

    log: Counter = Counter()
    Env = counting(Banking, log)
    trainer = GRPOTrainer(model=build_tiny_model(tiny, hidden_size=32, layers=1, heads=2),
                          args=grpo_args(tmp_path, max_completion_length=16), train_dataset=rl_dataset(corpus),
                          processing_class=tiny, environment_factory=Env)
    assert trainer.reward_func_names == [Env.__name__]  # get_reward is the reward
    trainer.train()
    rollouts = 2 * 4  # steps x completions per step
    assert log["resets"] == rollouts == log["get_reward"] == log["scored"]
    assert log["instances"] == 4 < rollouts  # one per rollout of a batch, reused (reset) across batches
    assert sum(v for k, v in log.items() if k.startswith("row:")) == rollouts
    assert all(v % 2 == 0 for k, v in log.items() if k.startswith("row:"))  # each prompt twice (the group)
    logged = [h for h in trainer.state.log_history if f"rewards/{Env.__name__}/mean" in h]
    assert len(logged) == 2 and all(h["reward"] == pytest.approx(h[f"rewards/{Env.__name__}/mean"]) for h in logged)
    # the last batch's environments still hold their episodes: the logged reward is theirs
    last = trainer.environments
    assert len(last) == 4 and all(isinstance(e, Env) for e in last)
    assert logged[-1]["reward"] == pytest.approx(sum(e.reward_result.total for e in last) / len(last), abs=1e-5)
    assert "tools/call_frequency" in logged[-1]  # TRL ran its tool loop with the environment's methods


def scripted_trainer_class(rows: list[dict[str, Any]], tokenizer: Any) -> type:
    """TRL's GRPOTrainer whose generations are scripted (everything else is TRL's): in each group,
    the first rollout makes the row's ground-truth calls (or, on a no-call task, declines) and the
    second makes a wrong call; after a tool result each says "Done."."""
    import torch  # noqa: F401  # TRL's module needs it anyway
    from trl import GRPOTrainer

    by_user = {next(m["content"] for m in r["prompt"] if m["role"] == "user"): r for r in rows}

    def call_text(name: str, arguments: dict[str, Any]) -> str:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    class Scripted(GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            seen: Counter = Counter()
            out = []
            for ids in prompt_ids:
                text = tokenizer.decode(ids)
                if "<tool_response>" in text:
                    reply = "Done."
                else:
                    user = max((u for u in by_user if u in text), key=len)
                    task = by_user[user]["task"]
                    seen[user] += 1
                    if seen[user] % 2 == 0:
                        reply = call_text("get_balance", {"account_id": "acc_doesnotexist"})
                    elif task["calls"]:
                        reply = "\n".join(call_text(c["tool"], c["arguments"]) for c in task["calls"])
                    else:
                        reply = "Sorry, I cannot help with that."
                out.append(tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"])
            return out, None

    return Scripted


def test_grpo_trainer_dispatches_parsed_tool_calls_to_the_methods_and_scores_each_component(tmp_path, tiny, corpus,
                                                                                            rows, plugins):
    """Scripted generations (the tiny model cannot write a tool call) through TRL's parser, tool
    loop and reward function, with the reward as the ``prove`` reward function."""
    from prove_plugins.train.models.tiny import build_tiny_model

    log: Counter = Counter()
    Env = counting(prove_environment_factory("banking", plugins=plugins, reward_source="function", name="Banking"), log)
    trainer = scripted_trainer_class(rows, tiny)(
        model=build_tiny_model(tiny, hidden_size=32, layers=1, heads=2),
        args=grpo_args(tmp_path, max_completion_length=4096, max_tool_calling_iterations=2),
        train_dataset=rl_dataset(corpus), processing_class=tiny, environment_factory=Env,
        reward_funcs=Env.reward_functions())
    assert trainer.reward_func_names == ["prove"]
    trainer.train()
    assert log["resets"] == 8 and log["scored"] == 8 and log["get_reward"] == 0
    last = trainer.environments
    made = 0
    for truth, wrong in zip(last[::2], last[1::2], strict=True):  # the group's two rollouts, in order
        assert truth.task == wrong.task
        gt = [(c.tool, c.arguments) for c in truth.task.calls]
        assert [(c.name, c.arguments) for c in truth.calls] == gt  # parsed by TRL, run by the methods
        assert [c.name for c in wrong.calls] == ["get_balance"]
        assert wrong.results[0].is_error
        assert truth.reward_result.total > wrong.reward_result.total
        assert truth.reward_result.total == pytest.approx(truth.reward_result.best)
        assert truth.rollout.content in ("Done.", "Sorry, I cannot help with that.")
        made += len(gt) + 1
    assert log["tool_calls"] >= made > 0  # every call of the last batch went through a method (and the first batch's)
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    applying = {name for e in last for name, value in e.scores.items() if value is not None}
    assert {"validity", "coverage", "arguments"} <= applying
    assert {f"prove/{name}" for name in applying} <= set(logged[-1])  # every component that applied, logged
    assert logged[-1]["tools/call_frequency"] > 0
    # TRL's logged reward is the mean PROVE total of the last batch's rollouts
    assert logged[-1]["reward"] == pytest.approx(sum(e.reward_result.total for e in last) / len(last), abs=1e-5)
    assert logged[-1]["rewards/prove/mean"] == pytest.approx(logged[-1]["reward"], abs=1e-5)
