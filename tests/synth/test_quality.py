"""The corpus-quality figures (prove_core.synth.quality) catch what they claim to catch, and a
synthesized corpus meets them."""

import json

from prove_core.model import Example, Message, Task, ToolCall, from_json, read_jsonl
from prove_core.synth.quality import figures, skeleton, unnamed_entity_calls


def chat(*messages):
    return Example(id="x", messages=[Message(role="system", content="s"), *messages], tools=[],
                   task=Task(servers=["vehicle"], expected="call"))


def call(name, **args):
    return Message(role="assistant", tool_calls=[ToolCall(id=f"c{len(args)}{name}", name=name, arguments=args)])


def result(call_id, data):
    return Message(role="tool", tool_call_id=call_id, content=json.dumps(data))


LISTING = {"vehicles": [{"id": "veh_aaaaaaaa", "name": "Blue Bolt"}, {"id": "veh_bbbbbbbb", "name": "The Tank"}]}


def test_a_switch_to_an_entity_the_user_did_not_name_is_a_guess():
    guess = chat(Message(role="user", content="Start charging veh_aaaaaaaa and list my cars."),
                 call("list_vehicles"), result("c0list_vehicles", LISTING),
                 call("start_charging", vehicle_id="veh_bbbbbbbb"))
    checked, guesses = unnamed_entity_calls(guess)
    assert checked == 1 and guesses and "veh_bbbbbbbb" in guesses[0]


def test_the_named_entity_or_one_the_user_singles_out_is_not_a_guess():
    named = chat(Message(role="user", content="List my cars, then start charging veh_aaaaaaaa."),
                 call("list_vehicles"), result("c0list_vehicles", LISTING),
                 call("start_charging", vehicle_id="veh_aaaaaaaa"))
    singled_out = chat(Message(role="user", content="veh_aaaaaaaa is fine. List my cars and charge The Tank."),
                       call("list_vehicles"), result("c0list_vehicles", LISTING),
                       call("start_charging", vehicle_id="veh_bbbbbbbb"))
    never_named = chat(Message(role="user", content="List my cars and charge one of them."),
                       call("list_vehicles"), result("c0list_vehicles", LISTING),
                       call("start_charging", vehicle_id="veh_bbbbbbbb"))
    for example in (named, singled_out, never_named):
        assert unnamed_entity_calls(example)[1] == []


def test_skeletons_mask_values_so_templates_show():
    a = skeleton('Move $25.00 from acc_aaaaaaaa to "Rent"', ["25.0"])
    b = skeleton('Move $310 from acc_bbbbbbbb to "Car loan"', ["310"])
    c = skeleton("Send Chen Lopez 40 dollars", ["Chen Lopez", "40"])
    assert a == b == "Move <N> from <ID> to <V>" and c == "Send <V> <N> dollars"


def test_figures_flag_silent_examples_and_unwritten_replies():
    silent = Example(id="s", messages=[Message(role="system", content="s"), Message(role="user", content="hi")],
                     tools=[], task=Task(servers=["banking"], expected="abstain"))
    q = figures([silent])
    assert q["no_assistant_turn"] == 1.0 and q["written_replies"] == 0.0


def test_a_synthesized_corpus_meets_the_figures(corpus):
    q = corpus["report"]["quality"]
    assert q["no_assistant_turn"] == 0.0
    assert q["written_replies"] == 1.0
    assert q["unnamed_entity_calls"] <= 0.01, q["unnamed_entity_examples"]
    assert q["mistakes"]["marked"] == q["mistakes"]["schema_rejected_calls"]
    assert q["slots"]["share_varied"] >= 0.6, q["slots"]
    assert q["skeletons"]["share"] >= 0.5  # most user turns read differently once values are masked
    examples = [from_json(r, Example) for r in read_jsonl(corpus["dir"] / "corpus.jsonl")]
    for e in examples:  # no user turn spells out a tool or parameter name
        names = {t["function"]["name"] for t in e.tools if "_" in t["function"]["name"]}
        for m in e.messages:
            if m.role == "user":
                assert not [n for n in names if n in (m.content or "")], (e.id, m.content)
