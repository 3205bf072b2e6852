"""What synthesis tells the user: stats.md's drops-by-tool table names tools (each drop detail's tool
is found where the detail names it, never its first word), and the progress bar."""

import pytest

from prove_core.synth.pipeline import _failing_tool


@pytest.mark.parametrize(("detail", "tool"), [
    ("no account value flowed from find_customers to list_accounts", "list_accounts"),
    ("no flow:order_id value flowed from place_order to track_order", "track_order"),
    ("close_account: every request is refused (ACCOUNT_FROZEN)", "close_account"),
    ("close_account needs the result of a failed call", "close_account"),
    ("2 of 4 calls failed: close_account FAILED_PRECONDITION/ACCOUNT_FROZEN: frozen | x", "close_account"),
    ("get_statement gave a different result on replay", "get_statement"),
    ("reset_password.new_password='x' appears in no earlier turn", "reset_password"),
    ("the first call could not be planned", None),
    ("user turns name ids that do not exist: ['acc_00000000']", None),
    ("", None),
])
def test_the_tool_a_drop_is_about(detail, tool):
    assert _failing_tool(detail) == tool


def test_the_drops_table_of_a_real_corpus_lists_only_real_tools(corpus, plugins):
    tools = {name for server in ("banking", "shopping") for name in plugins.registry.load("servers", server).tools}
    listed = {tool for counts in corpus["report"]["drops_by_tool"].values() for tool in counts}
    assert listed, corpus["report"]["drops"]
    assert listed <= tools, listed - tools


def test_the_progress_bar_shows_rate_and_time_left_on_a_terminal_only(monkeypatch):
    import io
    import sys

    from prove_core.synth.pipeline import Progress

    shown = io.StringIO()
    monkeypatch.setattr(sys, "stderr", shown)
    bar = Progress(10, True, initial=2)
    for done in (3, 5, 5, 12):
        bar.update(done)
    bar.close()
    text = shown.getvalue()
    assert "synth" in text and "10/10" in text and "conv/s" in text and "<" in text  # rate, time left
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    bar = Progress(10, False)
    bar.update(4)
    bar.close()
    assert quiet.getvalue() == ""
