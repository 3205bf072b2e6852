"""The toolkit's shared helpers: ISO dates, the Record shape and the typed NOT_FOUND lookups."""

import datetime as dt
import re
from typing import Annotated, Any

import pytest
from pydantic import Field

from prove_core.errors import InvalidArgument, NotFound
from prove_core.toolkit import (
    ISO_DATE,
    Record,
    Server,
    State,
    Table,
    iso_datetime,
    lookup,
    parse_date,
    require_found,
)

AIRPORTS = {"LIS": "Lisbon", "OPO": "Porto"}


class Shop(State):
    items = Table("item", prefix="itm")
    gift_cards = Table("gift card", prefix="gc")


# -- dates ----------------------------------------------------------------------------------------


def test_iso_datetime_is_utc_to_the_second_with_a_z():
    when = dt.datetime(2026, 3, 1, 9, 30, 15, 999_999, tzinfo=dt.UTC)
    assert iso_datetime(when) == "2026-03-01T09:30:15Z"


def test_iso_datetime_converts_an_aware_time_and_takes_a_naive_one_as_utc():
    lisbon_summer = dt.timezone(dt.timedelta(hours=1))
    assert iso_datetime(dt.datetime(2026, 7, 1, 10, 0, tzinfo=lisbon_summer)) == "2026-07-01T09:00:00Z"
    assert iso_datetime(dt.datetime(2026, 7, 1, 10, 0)) == "2026-07-01T10:00:00Z"  # never the host's zone


def test_iso_datetime_of_the_session_clock():
    state = Shop(salt="s")
    stamp = iso_datetime(state.now())
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", stamp)
    assert stamp.startswith(state.today().isoformat())


def test_iso_datetime_strings_sort_in_time_order():
    base = dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    moments = [base + dt.timedelta(seconds=s) for s in (-86_400 * 40, -1, 0, 1, 3_600, 86_400 * 400)]
    assert sorted(iso_datetime(m) for m in moments) == [iso_datetime(m) for m in moments]


def test_iso_date_pattern_checks_the_shape_only():
    assert re.match(ISO_DATE, "2026-03-01")
    for bad in ("2026-3-1", "26-03-01", "2026-03-01T00:00", "2026/03/01", " 2026-03-01", "x2026-03-01"):
        assert not re.search(ISO_DATE, bad), bad
    assert re.match(ISO_DATE, "2026-02-30")  # the shape is right: parse_date refuses the day
    with pytest.raises(InvalidArgument) as err:
        parse_date("2026-02-30", "date")
    assert err.value.reason == "BAD_DATE"


def test_iso_date_in_a_tool_schema_rejects_a_bad_shape():
    from prove_core.env.runtime import ServerRuntime

    server = Server("dates", domain="test", description="Dates.", state=Shop, seed=lambda rng, o: Shop())

    @server.tool(read_only=True, examples=[{"day": "2026-03-01"}])
    def weekday(state: Shop, day: Annotated[str, Field(pattern=ISO_DATE, description="A day.")]) -> dict:
        """The weekday of a day."""
        return {"weekday": parse_date(day, "day").strftime("%A")}

    assert server.specs()[0].parameters["properties"]["day"]["pattern"] == ISO_DATE
    rt = ServerRuntime(server)
    sid = rt.new_session()
    assert rt.call(sid, "weekday", {"day": "2026-03-01"}).data == {"weekday": "Sunday"}
    assert rt.call(sid, "weekday", {"day": "1 March"}).error["reason"] == "SCHEMA_VIOLATION"


# -- Record ---------------------------------------------------------------------------------------


def test_record_is_the_plain_dict_tables_return():
    assert Record == dict[str, Any]
    state = Shop(salt="s")
    item: Record = state.items.insert({"name": "lamp"})
    assert type(item) is dict and type(state.items.get(item["id"])) is dict


# -- lookup ---------------------------------------------------------------------------------------


def test_lookup_returns_a_copy_of_the_record():
    state = Shop(salt="s")
    item = state.items.insert({"name": "lamp"})
    found = lookup(state.items, item["id"])
    assert found == item
    found["name"] = "changed"
    assert state.items.get(item["id"])["name"] == "lamp"


def test_lookup_default_error_matches_table_get():
    state = Shop(salt="s")
    with pytest.raises(NotFound) as mine:
        lookup(state.items, "itm_nope")
    with pytest.raises(NotFound) as table:
        state.items.get("itm_nope")
    assert mine.value.to_dict() == table.value.to_dict() == {
        "code": "NOT_FOUND", "reason": "ITEM_NOT_FOUND", "message": "item 'itm_nope' does not exist",
        "details": {"id": "itm_nope"}}


def test_lookup_words_the_error_as_asked():
    state = Shop(salt="s")
    with pytest.raises(NotFound) as err:
        lookup(state.items, "LAMP", message="no item LAMP; search first", reason="UNKNOWN_ITEM", sku="lamp")
    assert err.value.to_dict() == {"code": "NOT_FOUND", "reason": "UNKNOWN_ITEM", "message": "no item LAMP; search first",
                                   "details": {"sku": "lamp"}}
    with pytest.raises(NotFound) as err:
        lookup(state.gift_cards, "gc_1")  # an entity name with a space gives a reason without one
    assert err.value.reason == "GIFT_CARD_NOT_FOUND"
    with pytest.raises(NotFound) as err:
        lookup(state.items, "itm_1", what="lamp")
    assert (err.value.reason, err.value.message) == ("LAMP_NOT_FOUND", "lamp 'itm_1' does not exist")


def test_lookup_in_a_mapping():
    assert lookup(AIRPORTS, "LIS", what="airport") == "Lisbon"
    with pytest.raises(NotFound) as err:
        lookup(AIRPORTS, "XXX", what="airport", code="XXX")
    assert err.value.to_dict() == {"code": "NOT_FOUND", "reason": "AIRPORT_NOT_FOUND",
                                   "message": "airport 'XXX' does not exist", "details": {"code": "XXX"}}
    with pytest.raises(NotFound) as err:
        lookup(AIRPORTS, "XXX", message="no airport XXX", reason="AIRPORT_NOT_FOUND")
    assert err.value.details == {"id": "XXX"}


def test_lookup_finds_falsy_values_in_a_mapping():
    assert lookup({"empty": "", "zero": 0, "none": None}, "zero", what="value") == 0
    assert lookup({"none": None}, "none", what="value") is None  # present, though None


def test_lookup_in_a_mapping_needs_a_name_for_its_error():
    with pytest.raises(TypeError):
        lookup(AIRPORTS, "XXX")
    assert lookup(AIRPORTS, "OPO") == "Porto"  # only a miss needs it


def test_lookup_takes_detail_names_that_shadow_its_own_parameters():
    with pytest.raises(NotFound) as err:
        lookup(AIRPORTS, "XXX", what="airport", table="airports", key="XXX")
    assert err.value.details == {"table": "airports", "key": "XXX"}


# -- require_found -------------------------------------------------------------------------------


def test_require_found_passes_a_value_through():
    state = Shop(salt="s")
    item = state.items.insert({"name": "lamp"})
    assert require_found(state.items.first(name="lamp"), "no lamp", reason="NO_LAMP") == item
    assert require_found(0, "no zero", reason="NO_ZERO") == 0  # only None is missing
    assert require_found([], "no list", reason="NO_LIST") == []


def test_require_found_raises_the_typed_not_found():
    state = Shop(salt="s")
    with pytest.raises(NotFound) as err:
        require_found(state.items.first(name="sofa"), "no sofa in stock; see list_items", reason="ITEM_NOT_FOUND",
                      name="sofa")
    assert err.value.to_dict() == {"code": "NOT_FOUND", "reason": "ITEM_NOT_FOUND",
                                   "message": "no sofa in stock; see list_items", "details": {"name": "sofa"}}


def test_local_minute_is_the_session_clock_to_the_minute_without_a_zone():
    import datetime as dt

    from prove_core.toolkit import MINUTE_FORMAT, local_minute, minute_text

    class Clocked:
        def now(self):
            return dt.datetime(2026, 3, 1, 9, 30, 59, 123, tzinfo=dt.UTC)

    when = local_minute(Clocked())
    assert when == dt.datetime(2026, 3, 1, 9, 30) and when.tzinfo is None
    assert minute_text(when) == "2026-03-01T09:30"
    assert dt.datetime.strptime(minute_text(when), MINUTE_FORMAT) == when
