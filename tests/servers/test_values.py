"""The bundled servers draw values people use, and values that belong together (issue 26, item 5):
each figure of ``benchmarks/bench_values.py`` over calls drawn as synthesis draws them, given the
call's other arguments (``phrasing.draw_value``)."""

import random

import pytest

from benchmarks.bench_values import (
    Drawer,
    event_lengths,
    limit_prices,
    listing_mismatches,
    load_servers,
    merchant_mismatches,
    odd_floats,
    option_mismatches,
    party_mismatches,
    reversed_ranges,
)
from prove_core.toolkit.phrasing import check_phrasings, draw_value, takes_args

DRAWS = 200


@pytest.fixture(scope="module")
def servers():
    return load_servers()


def test_limit_prices_lie_within_ten_percent_of_the_symbols_quote(servers):
    assert limit_prices(servers, DRAWS, True) == {"limit_in_0.5-1.5x": 1.0, "limit_in_0.9-1.1x": 1.0}


def test_new_and_moved_events_last_as_long_as_such_events_do(servers):
    figures = event_lengths(servers, DRAWS, True)
    assert figures["events_over_12h"] == 0
    assert figures["events_15min-3h"] >= 0.95  # a moved event keeps its own length


def test_no_drawn_range_ends_before_it_starts(servers):
    assert reversed_ranges(servers, DRAWS, True) == {"ranges_reversed": 0}


def test_expenses_are_filed_under_a_category_their_merchant_belongs_to(servers):
    assert merchant_mismatches(servers, DRAWS, True) == {"merchant_mismatch": 0}


def test_listings_fit_their_category_and_offers_their_listing(servers):
    assert listing_mismatches(servers, DRAWS, True) == {"listing_mismatch": 0, "offers_off": 0}


def test_flight_bookings_name_as_many_travellers_as_passengers_each_fit_to_fly(servers):
    assert party_mismatches(servers, DRAWS, True) == {"party_mismatch": 0}


def test_dishes_are_ordered_with_options_they_offer(servers):
    assert option_mismatches(servers, DRAWS, True) == {"option_mismatch": 0}


def test_numbers_are_drawn_with_the_digits_a_person_says(servers):
    assert odd_floats(servers, DRAWS, True) == {"odd_floats": 0}


def test_the_figures_catch_values_nobody_would_use(servers, monkeypatch):
    tool = servers["trading"].tools["place_limit_order"]
    monkeypatch.setitem(tool.values, "limit_price", lambda rng, s: rng.choice((0.6523, 950.0)))
    assert limit_prices(servers, 50, True)["limit_in_0.9-1.1x"] < 0.2
    assert odd_floats({"trading": servers["trading"]}, 200, True)["odd_floats"] > 0
    expense = servers["budget"].tools["add_expense"]
    monkeypatch.setitem(expense.values, "merchant", lambda rng, s: "Metro Transit")
    assert merchant_mismatches(servers, 50, True)["merchant_mismatch"] > 0.3  # add_expense of add and update


def test_a_source_that_takes_args_gets_the_calls_other_arguments(servers):
    tool = servers["trading"].tools["place_limit_order"]
    source = tool.values["limit_price"]
    assert takes_args(source) and not takes_args(lambda rng, s: 1)
    drawer = Drawer(servers["trading"])
    quote = drawer.state.securities.get("MSFT")["ask"]
    for i in range(30):
        price = draw_value(source, random.Random(i), drawer.state, {"symbol": "MSFT", "side": "buy"})
        assert 0.9 * quote <= price <= 1.02 * quote
    assert draw_value(source, random.Random(0), drawer.state) > 0  # still a price without them


def test_the_phrasing_check_draws_args_sources_with_each_examples_arguments(servers):
    import attrs

    tool = servers["trading"].tools["place_limit_order"]
    state = Drawer(servers["trading"]).state
    examples = [{"symbol": "MSFT", "side": "buy", "quantity": 1, "limit_price": 400.0}]

    def negative_with_args(rng, s, args=None):
        return 10.0 if args is None else -1.0

    broken = attrs.evolve(tool, values={**tool.values, "limit_price": negative_with_args})
    assert any("limit_price" in p and "for {" in p for p in check_phrasings(broken, examples, state))
