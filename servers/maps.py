"""maps — a city map of Stockholm: places, geocoding, routes by mode, distance matrices, opening
hours, nearby search, reviews and the signed-in user's saved places.

Mostly read-only and deterministic: the only writes are the saved places. The gazetteer is a
fixed set of neighborhoods (real centres) holding a few real landmarks and seeded places with
addresses, coordinates, weekly opening hours and reviews. Geography a router must respect:

- Fjäderholmarna and Sandön (Sandhamn) are islands without a bridge: only ``transit`` reaches
  them, by ferry from Strömkajen. Walking, cycling and driving across the water is NO_ROUTE.
  The Fjäderholmarna ferry only sails in season (April to October).
- Nobody walks more than 20 km or cycles more than 60 km (NO_ROUTE); transit has no service
  between 01:00 and 05:00, ferries sail 07:00-20:00.
- Distance is the great-circle distance times a road factor (each neighborhood has a seeded one;
  a route uses the mean of its ends); duration follows from each mode's speed. Driving in the
  weekday rush hours is slower, and driving into the inner-city congestion zone costs a toll.

Times are Stockholm local time (CET, CEST in summer) derived from the session clock, so
"open now" and departure times are reproducible.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
import unicodedata
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    ToolError,
    fake,
    haversine_km,
    paginate,
    parse_date,
    ref,
    require,
)

# -- vocabulary -------------------------------------------------------------------------------------

Category = Literal[
    "restaurant", "cafe", "bar", "museum", "park", "landmark", "hotel", "supermarket", "pharmacy", "hospital",
    "gas_station", "gym", "bookstore", "transit_station", "ferry_terminal", "airport",
]
Mode = Literal["driving", "walking", "cycling", "transit"]
MODES: tuple[str, ...] = ("driving", "walking", "cycling", "transit")
ListName = Literal["favorites", "want_to_go", "starred"]

CITY_CENTRE = (59.3293, 18.0686)
SERVICE_RADIUS_KM = 80.0
MAX_WALK_KM = 20.0
MAX_CYCLE_KM = 60.0
MATRIX_MAX_ELEMENTS = 25
MAX_SAVED_PER_LIST = 30
NEAR_ADDRESS_M = 250  # reverse geocoding snaps to a street address this close
NEAR_NEIGHBORHOOD_KM = 2.5  # ... or else names the neighborhood whose centre is this close
SPEED_KMH = {"walking": 5.0, "cycling": 16.0, "transit": 24.0, "ferry": 22.0}
TRANSIT_WAIT_MIN = 6
FERRY_BOARDING_MIN = 10
TRANSIT_HOURS = (5, 1)  # service from 05:00 until 01:00 the next night
FERRY_HOURS = (7, 20)
CONGESTION_ZONE = frozenset({"Norrmalm", "Östermalm", "Södermalm", "Gamla stan", "Kungsholmen", "Vasastan"})
MAINLAND = "mainland"
STRÖMKAJEN = (59.3294, 18.0760)  # where the archipelago ferries leave from

# Neighborhoods: name → (lat, lon, landmass, city, postal code, streets). Real centres and streets.
NEIGHBORHOODS: dict[str, tuple[float, float, str, str, str, tuple[str, ...]]] = {
    "Gamla stan": (59.3251, 18.0711, MAINLAND, "Stockholm", "111 29",
                   ("Västerlånggatan", "Stora Nygatan", "Köpmangatan")),
    "Norrmalm": (59.3340, 18.0630, MAINLAND, "Stockholm", "111 51", ("Drottninggatan", "Hamngatan", "Regeringsgatan")),
    "Östermalm": (59.3380, 18.0850, MAINLAND, "Stockholm", "114 56",
                  ("Strandvägen", "Karlavägen", "Birger Jarlsgatan")),
    "Södermalm": (59.3150, 18.0720, MAINLAND, "Stockholm", "118 46", ("Götgatan", "Hornsgatan", "Folkungagatan")),
    "Kungsholmen": (59.3320, 18.0330, MAINLAND, "Stockholm", "112 21",
                    ("Fleminggatan", "Hantverkargatan", "Sankt Eriksgatan")),
    "Vasastan": (59.3450, 18.0500, MAINLAND, "Stockholm", "113 41", ("Odengatan", "Upplandsgatan", "Dalagatan")),
    "Djurgården": (59.3260, 18.1150, MAINLAND, "Stockholm", "115 21", ("Djurgårdsvägen", "Allmänna gränd")),
    "Solna": (59.3600, 18.0000, MAINLAND, "Solna", "169 70", ("Råsundavägen", "Frösundaleden")),
    "Lidingö": (59.3660, 18.1500, MAINLAND, "Lidingö", "181 30", ("Stockholmsvägen", "Kyrkvägen")),
    "Arlanda": (59.6498, 17.9238, MAINLAND, "Stockholm-Arlanda", "190 45", ("Arlandavägen",)),
    "Fjäderholmarna": (59.3265, 18.1640, "Fjäderholmarna", "Stockholm", "111 15", ("Stora Fjäderholmen",)),
    "Sandhamn": (59.2880, 18.9130, "Sandön", "Sandhamn", "130 39", ("Hamnplanen", "Sandhamnsvägen")),
}
# Islands without a bridge: their harbour and the months (inclusive) the ferry sails, None = all year.
FERRIES: dict[str, tuple[tuple[float, float], str, tuple[int, int] | None]] = {
    "Fjäderholmarna": ((59.3266, 18.1636), "Fjäderholmslinjen", (4, 10)),
    "Sandön": ((59.2881, 18.9128), "Waxholmsbolaget line 69", None),
}
# Places that exist at every seed: (name, category, neighborhood, street, number, lat, lon).
LANDMARKS = (
    ("Stockholm Central Station", "transit_station", "Norrmalm", "Centralplan", 15, 59.3303, 18.0586),
    ("Royal Palace", "landmark", "Gamla stan", "Slottsbacken", 1, 59.3268, 18.0717),
    ("Strömkajen Ferry Terminal", "ferry_terminal", "Norrmalm", "Strömkajen", 2, 59.3294, 18.0760),
    ("Vasa Museum", "museum", "Djurgården", "Galärvarvsvägen", 14, 59.3280, 18.0914),
    ("Fjäderholmarna Ferry Pier", "ferry_terminal", "Fjäderholmarna", "Stora Fjäderholmen", 1, 59.3266, 18.1636),
    ("Sandhamn Harbour", "ferry_terminal", "Sandhamn", "Hamnplanen", 1, 59.2881, 18.9128),
    ("Stockholm Arlanda Airport", "airport", "Arlanda", "Arlandavägen", 1, 59.6498, 17.9238),
)
WORDS = ("Blå", "Gröna", "Lilla", "Gamla", "Norra", "Södra", "Kungs", "Sjö", "Ek", "Lykt", "Svan", "Ankar", "Fyr",
         "Tran", "Måne", "Sol", "Björk", "Lind", "Hav", "Kvarn")
NAME_PATTERNS: dict[str, tuple[str, ...]] = {
    "restaurant": ("{w} Bistro", "{w}krogen", "{w} Kök", "Brasserie {w}", "{w} Matsal"),
    "cafe": ("{w} Kafé", "{w} Bageri", "Konditori {w}", "{w} Espresso"),
    "bar": ("{w} Bar", "{w} Pub", "Vinbar {w}"),
    "museum": ("{t} Museum",),
    "park": ("{w}parken",),
    "hotel": ("Hotel {w}", "{w} Hotell"),
    "supermarket": ("{c} {d}",),
    "pharmacy": ("Apotek {w}",),
    "hospital": ("{d} Health Centre",),
    "gas_station": ("{c} {d}",),
    "gym": ("{w} Fitness",),
    "bookstore": ("{w} Bokhandel",),
}
MUSEUM_THEMES = ("Maritime", "Photography", "Design", "Toy", "Music", "Nordic Craft", "Science", "Tram")
# What users search for and note on the map (free values for synthesis).
PLACE_QUERIES = ("cafe Södermalm", "pharmacy", "museum", "bar Gamla stan", "Götgatan", "hotel", "park",
                 "gym Kungsholmen", "bookstore", "restaurant Östermalm", "supermarket Vasastan", "bistro", "konditori",
                 "Drottninggatan", "vinbar", "espresso")
PLACE_NOTES = ("Try the cinnamon buns", "Good for a rainy day", "Book a table for Friday", "Recommended by Lena",
               "Open late on weekends", "Bring the kids", "Great view from the terrace", "Cash only?",
               "Check the summer hours", "Meet Omar here")
CHAINS = {"supermarket": ("Matboden", "Närköp", "Stadslivs"), "gas_station": ("Tankstopp", "Nordbränsle")}
# The order categories are handed out in, so every category exists at any seed size.
PLACE_MIX = ("restaurant", "cafe", "restaurant", "bar", "museum", "cafe", "park", "hotel", "supermarket",
             "restaurant", "pharmacy", "gym", "bookstore", "cafe", "gas_station", "hospital")
ISLAND_CATEGORIES = ("cafe", "restaurant", "bar")
PRICE_LEVELS = {"restaurant": (2, 4), "cafe": (1, 2), "bar": (2, 3), "hotel": (2, 4)}
# Weekly hours per category: (Mon-Fri, Sat, Sun) as (open, close) or None for closed, a close at or
# before the opening time means after midnight; "24h" is always open. Then the chance of a closed Monday.
HOURS: dict[str, tuple[Any, float]] = {
    "restaurant": ((("11:00", "22:00"), ("12:00", "23:00"), ("12:00", "21:00")), 0.3),
    "cafe": ((("07:30", "18:00"), ("09:00", "17:00"), ("10:00", "17:00")), 0.0),
    "bar": ((("16:00", "01:00"), ("14:00", "02:00"), ("14:00", "23:00")), 0.4),
    "museum": ((("10:00", "17:00"), ("10:00", "18:00"), ("10:00", "18:00")), 1.0),
    "landmark": ((("10:00", "17:00"), ("10:00", "17:00"), ("10:00", "17:00")), 1.0),
    "supermarket": ((("07:00", "22:00"), ("08:00", "22:00"), ("09:00", "22:00")), 0.0),
    "pharmacy": ((("08:00", "20:00"), ("10:00", "17:00"), ("11:00", "16:00")), 0.0),
    "gym": ((("06:00", "22:00"), ("08:00", "20:00"), ("08:00", "20:00")), 0.0),
    "bookstore": ((("10:00", "19:00"), ("10:00", "17:00"), None), 0.0),
    "transit_station": ((("05:00", "01:00"), ("05:00", "01:00"), ("05:00", "01:00")), 0.0),
    "ferry_terminal": ((("07:00", "20:00"), ("08:00", "20:00"), ("08:00", "20:00")), 0.0),
    "park": ("24h", 0.0), "hotel": ("24h", 0.0), "hospital": ("24h", 0.0), "gas_station": ("24h", 0.0),
    "airport": ("24h", 0.0),
}
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ALL_DAY = "00:00-24:00"
REVIEW_TEXT = {
    5: ("Wonderful, will be back.", "Best in the neighborhood.", "Friendly staff and a lovely atmosphere."),
    4: ("Very good, a little crowded at lunch.", "Solid choice, fair prices.", "Nice place, slow service."),
    3: ("Fine, nothing special.", "Okay, but overpriced.", "Average; the photos flatter it."),
    2: ("Disappointing visit.", "Long queues and rude staff."),
    1: ("Would not go back.", "Closed when the hours said open."),
}

# Reusable parameter types.
PlaceId = Annotated[str, ref("place", "Id of a place (plc_...), from search_places, nearby_search or geocode.")]
COORDINATES = r"-?\d{1,3}(\.\d+)?,\s*-?\d{1,3}(\.\d+)?"
Coordinates = Annotated[str, Field(
    pattern=f"^{COORDINATES}$",
    description="Latitude and longitude in decimal degrees as 'lat,lon', e.g. '59.3251,18.0711'.")]
Location = Annotated[str, Field(
    pattern=f"^(plc_[0-9a-z]{{8}}|{COORDINATES})$",
    description="A place id (plc_...) from search_places or geocode, or coordinates 'lat,lon' such as "
                "'59.3251,18.0711'.")]
DepartureTime = Annotated[str | None, Field(
    pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:\d{2})?$",
    description="When to leave, ISO 8601 (e.g. 2026-03-02T17:30; without an offset it is Stockholm time). "
                "Default: now.")]
Limit = Annotated[int, Field(ge=1, le=50, description="Page size: how many results to return (1-50).")]
Offset = Annotated[int, Field(ge=0, description="How many results to skip; pass next_offset from the previous page.")]


# -- state and seed ---------------------------------------------------------------------------------


class MapState(State):
    """The map as one signed-in user sees it. ``cell`` is a ~1 km grid square, so proximity search
    looks up the squares around a point instead of scanning every place."""

    neighborhoods = Table("neighborhood", prefix="nbh", index=("name",))
    places = Table("place", prefix="plc", index=("category", "district", "cell"))
    reviews = Table("review", prefix="rvw", index=("place_id",))
    saved_places = Table("saved_place", prefix="sav", index=("place_id", "list_name"))


@attrs.frozen(kw_only=True)
class MapOptions:
    """Seed size: how many places (besides the fixed landmarks) the gazetteer holds."""

    places: int = attrs.field(default=120, validator=attrs.validators.gt(0))


def build_map(rng: random.Random, options: MapOptions) -> MapState:
    """Neighborhoods, landmarks, seeded places with hours and reviews, and a few saved places."""
    state = MapState(salt=str(rng.random()))
    for name, (lat, lon, landmass, city, postal, streets) in NEIGHBORHOODS.items():
        state.neighborhoods.insert({
            "name": name, "lat": lat, "lon": lon, "landmass": landmass, "city": city, "postal_code": postal,
            "streets": list(streets), "road_factor": round(rng.uniform(1.18, 1.42), 2),
            "congestion_zone": name in CONGESTION_ZONE,
        })
    taken: set[tuple[str, int]] = set()
    names: set[str] = set()
    for name, category, district, street, number, lat, lon in LANDMARKS:
        _insert_place(state, rng, name, category, district, street, number, lat, lon, taken, names)
    islands = [n for n, spec in NEIGHBORHOODS.items() if spec[2] != MAINLAND]
    mainland = [n for n, spec in NEIGHBORHOODS.items() if spec[2] == MAINLAND and n != "Arlanda"]
    for i in range(options.places):
        category, district = PLACE_MIX[i % len(PLACE_MIX)], rng.choice(mainland)
        on_island = i % 20 == 1  # every 20th place is a cafe, restaurant or bar on an island, alternating
        if on_island:
            district, category = islands[(i // 20) % len(islands)], ISLAND_CATEGORIES[(i // 40) % 3]
        spread = 0.0015 if on_island else 0.005
        lat, lon, *_ = NEIGHBORHOODS[district]
        street = rng.choice(NEIGHBORHOODS[district][5])
        _insert_place(state, rng, _place_name(rng, category, district, names), category, district, street,
                      rng.randint(1, 140), round(lat + rng.uniform(-spread, spread), 5),
                      round(lon + rng.uniform(-2 * spread, 2 * spread), 5), taken, names)
    places = state.places.all()
    for place in rng.sample(places, k=min(3, len(places))):
        list_name = "want_to_go" if state.saved_places.first(list_name="favorites") else "favorites"
        state.saved_places.insert({"place_id": place["id"], "list_name": list_name, "note": None,
                                   "saved_at": (state.now() - dt.timedelta(days=rng.randint(2, 200))).isoformat()})
    return state


def _place_name(rng: random.Random, category: str, district: str, names: set[str]) -> str:
    pattern = rng.choice(NAME_PATTERNS[category])
    name = pattern.format(w=rng.choice(WORDS), t=rng.choice(MUSEUM_THEMES), d=district,
                          c=rng.choice(CHAINS.get(category, ("",))))
    return name if name not in names else f"{name} {district}"


def _insert_place(state: MapState, rng: random.Random, name: str, category: str, district: str, street: str,
                  number: int, lat: float, lon: float, taken: set[tuple[str, int]], names: set[str]) -> None:
    while (street, number) in taken:  # one place per street address
        number += 1
    taken.add((street, number))
    names.add(name)
    _, _, landmass, city, postal, _ = NEIGHBORHOODS[district]
    place_id = state.places.new_id()
    quality = rng.choice((5, 4, 4, 4, 3, 3, 2))
    ratings = []
    for _ in range(rng.randint(0, 4)):
        rating = max(1, min(5, quality + rng.choice((-1, 0, 0, 1))))
        ratings.append(rating)
        state.reviews.insert({
            "place_id": place_id, "author": fake.full_name(rng), "rating": rating,
            "text": rng.choice(REVIEW_TEXT[rating]),
            "date": (state.today() - dt.timedelta(days=rng.randint(1, 400))).isoformat(),
        })
    low_high = PRICE_LEVELS.get(category)
    state.places.insert({
        "id": place_id,
        "name": name,
        "category": category,
        "district": district,
        "landmass": landmass,
        "address": {"street": street, "number": number, "postal_code": postal, "city": city},
        "formatted_address": f"{street} {number}, {postal} {city}",
        "lat": lat,
        "lon": lon,
        "cell": _cell(lat, lon),
        "phone": f"+46 8 {rng.randint(100, 799)} {rng.randint(10, 99)} {rng.randint(10, 99)}",
        "price_level": rng.randint(*low_high) if low_high else None,
        "rating": round(sum(ratings) / len(ratings), 1) if ratings else None,
        "review_count": len(ratings),
        "hours": _weekly_hours(rng, category),
    })


def _weekly_hours(rng: random.Random, category: str) -> dict[str, str | None]:
    """Weekday → "HH:MM-HH:MM" (None = closed); kept as flat strings because every place has them."""
    template, closed_monday = HOURS[category]
    if template == "24h":
        return dict.fromkeys(DAYS, ALL_DAY)
    weekday, saturday, sunday = template
    week = dict.fromkeys(DAYS[:5], weekday) | {"sat": saturday, "sun": sunday}
    if rng.random() < closed_monday:
        week["mon"] = None
    return {day: None if span is None else f"{span[0]}-{span[1]}" for day, span in week.items()}


# -- shared rules -------------------------------------------------------------------------------------


def _cell(lat: float, lon: float) -> str:
    """The ~1.1 km grid square of a point (0.01° of latitude by 0.02° of longitude at 59°N)."""
    return f"{math.floor(lat * 100)}:{math.floor(lon * 50)}"


def _normalize(text: str) -> str:
    """Lower case, accents folded (Östermalm → ostermalm), punctuation turned into spaces."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", folded.lower()).split())


def _utc_offset(when: dt.datetime) -> int:
    """Stockholm's offset from UTC in hours: 2 from the last Sunday of March to the last Sunday of
    October (01:00 UTC both times), else 1."""
    def last_sunday(month: int) -> dt.datetime:
        day = dt.datetime(when.year, month, 31, 1, tzinfo=dt.UTC)
        return day - dt.timedelta(days=(day.weekday() + 1) % 7)
    return 2 if last_sunday(3) <= when < last_sunday(10) else 1


def _local(when: dt.datetime) -> dt.datetime:
    return when.astimezone(dt.timezone(dt.timedelta(hours=_utc_offset(when))))


def _stamp(when: dt.datetime) -> str:
    return _local(when).isoformat(timespec="minutes")


def _minutes(hhmm: str) -> int:
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def _spans(place: Record, day: dt.date) -> list[tuple[dt.datetime, dt.datetime]]:
    """The place's open periods that start on ``day``, as local naive datetimes (an overnight
    period ends the next day)."""
    span = place["hours"][DAYS[day.weekday()]]
    if span is None:
        return []
    start, end = _minutes(span[:5]), _minutes(span[6:])
    if end <= start:
        end += 24 * 60
    midnight = dt.datetime(day.year, day.month, day.day)
    return [(midnight + dt.timedelta(minutes=start), midnight + dt.timedelta(minutes=end))]


def _open_24h(place: Record) -> bool:
    return all(span == ALL_DAY for span in place["hours"].values())


def _hours_view(hours: dict[str, str | None]) -> dict[str, list[dict[str, str]]]:
    """Weekly hours as tools show them: per weekday a list of {open, close}, empty when closed."""
    return {day: [] if span is None else [{"open": span[:5], "close": span[6:]}] for day, span in hours.items()}


def _open_state(place: Record, now_local: dt.datetime) -> dict[str, Any]:
    """Whether the place is open at a local time, when it closes, and when it next opens."""
    naive = now_local.replace(tzinfo=None)
    today = naive.date()
    for day in (today - dt.timedelta(days=1), today):  # yesterday's late opening can still run
        for start, end in _spans(place, day):
            if start <= naive < end:
                return {"open_now": True, "closes_at": None if _open_24h(place) else end.isoformat(timespec="minutes"),
                        "next_open": None}
    for offset in range(8):
        for start, _ in _spans(place, today + dt.timedelta(days=offset)):
            if start > naive:
                return {"open_now": False, "closes_at": None, "next_open": start.isoformat(timespec="minutes")}
    return {"open_now": False, "closes_at": None, "next_open": None}


def _parse_coordinates(text: str) -> tuple[float, float]:
    lat_text, lon_text = (part.strip() for part in text.split(","))
    lat, lon = float(lat_text), float(lon_text)
    require(-90 <= lat <= 90 and -180 <= lon <= 180, f"{text!r} is not a point on Earth: latitude must be within "
            "±90 and longitude within ±180", reason="INVALID_COORDINATES", error=InvalidArgument, coordinates=text)
    away = haversine_km(lat, lon, *CITY_CENTRE)
    require(away <= SERVICE_RADIUS_KM, f"{text} is {away:.0f} km from Stockholm; this map covers "
            f"{SERVICE_RADIUS_KM:.0f} km around the city", reason="OUTSIDE_SERVICE_AREA", distance_km=round(away, 1))
    return lat, lon


def _nearest_neighborhood(state: MapState, lat: float, lon: float) -> tuple[Record, float]:
    return min(((n, haversine_km(lat, lon, n["lat"], n["lon"])) for n in state.neighborhoods), key=lambda nd: nd[1])


def _neighborhood(state: MapState, name: str) -> Record:
    found = state.neighborhoods.first(name=name)
    assert found is not None, name
    return found


def _resolve(state: MapState, location: str) -> Record:
    """A route end: a place (PLACE_NOT_FOUND) or coordinates (INVALID_COORDINATES, OUTSIDE_SERVICE_AREA)."""
    if location.startswith("plc_"):
        place = state.places.get(location)
        return {"label": place["name"], "lat": place["lat"], "lon": place["lon"], "place_id": place["id"],
                "district": place["district"], "landmass": place["landmass"]}
    lat, lon = _parse_coordinates(location)
    hood, _ = _nearest_neighborhood(state, lat, lon)
    return {"label": f"{lat:.5f},{lon:.5f}", "lat": lat, "lon": lon, "place_id": None, "district": hood["name"],
            "landmass": hood["landmass"]}


def _departure(state: MapState, departure_time: str | None) -> dt.datetime:
    if departure_time is None:
        return state.now()
    try:
        when = dt.datetime.fromisoformat(departure_time.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{departure_time!r} is not a valid date and time", reason="BAD_DATE",
                              field="departure_time") from None
    if when.tzinfo is None:  # Stockholm wall-clock time
        guess = when.replace(tzinfo=dt.UTC) - dt.timedelta(hours=1)
        when = when.replace(tzinfo=dt.timezone(dt.timedelta(hours=_utc_offset(guess))))
    when = when.astimezone(dt.UTC)
    require(when >= state.now() - dt.timedelta(minutes=1), f"departure_time {departure_time} is in the past; "
            f"it is now {_stamp(state.now())}", reason="DEPARTURE_TIME_IN_PAST", error=InvalidArgument)
    return when


def _no_route(why: str, mode: str, **details: Any) -> FailedPrecondition:
    return FailedPrecondition(f"no {mode} route: {why}", reason="NO_ROUTE", mode=mode, **details)


def _congestion_toll(local: dt.datetime) -> int:
    """Stockholm congestion tax in SEK for one passage: weekdays 06:00-18:29, more at peak, none in July."""
    if local.weekday() >= 5 or local.month == 7:
        return 0
    minute = local.hour * 60 + local.minute
    if not 6 * 60 <= minute < 18 * 60 + 30:
        return 0
    peak = 7 * 60 + 30 <= minute < 8 * 60 + 30 or 16 * 60 <= minute < 17 * 60 + 30
    return 45 if peak else 30


def _in_service(local: dt.datetime, hours: tuple[int, int]) -> bool:
    first, last = hours
    return first <= local.hour < last if first < last else not last <= local.hour < first


def _road_factor(state: MapState, a: Record, b: Record) -> float:
    return (_neighborhood(state, a["district"])["road_factor"] + _neighborhood(state, b["district"])["road_factor"]) / 2


def _leg(mode: str, start: str, end: str, km: float, minutes: float) -> Record:
    return {"mode": mode, "from": start, "to": end, "distance_km": round(km, 2), "duration_min": round(minutes)}


def _land_leg(state: MapState, mode: str, a: Record, b: Record, local: dt.datetime, avoid: set[str]) -> Record:
    """One leg over land (same landmass) by ``mode``; a transit leg this short is walked."""
    km = haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]) * _road_factor(state, a, b)
    if mode == "walking":
        return _leg("walking", a["label"], b["label"], km * 0.95, km * 0.95 / SPEED_KMH["walking"] * 60)
    if mode == "cycling":
        return _leg("cycling", a["label"], b["label"], km, km / SPEED_KMH["cycling"] * 60)
    if mode == "transit":
        if km < 0.8:
            return _leg("walking", a["label"], b["label"], km, km / SPEED_KMH["walking"] * 60)
        km *= 1.1  # lines do not run straight
        return _leg("transit", a["label"], b["label"], km, km / SPEED_KMH["transit"] * 60 + TRANSIT_WAIT_MIN)
    highways = "highways" not in avoid
    km *= 1.0 if highways else 1.08
    speed = (60.0 if highways else 42.0) if km > 10 else 30.0  # open road on long trips, city streets on short
    speed /= 1.4 if _rush_hour(local) else 1.0
    return _leg("driving", a["label"], b["label"], km, km / speed * 60)


def _rush_hour(local: dt.datetime) -> bool:
    return local.weekday() < 5 and (7 <= local.hour < 9 or 16 <= local.hour < 18)


def _plan(state: MapState, a: Record, b: Record, mode: str, depart: dt.datetime, avoid: set[str]) -> Record:
    """A route from ``a`` to ``b`` leaving at ``depart``, or NO_ROUTE saying why."""
    local = _local(depart)
    straight = haversine_km(a["lat"], a["lon"], b["lat"], b["lon"])
    require(straight >= 0.01, "origin and destination are the same place", reason="SAME_ORIGIN_DESTINATION",
            error=InvalidArgument)
    legs: list[Record] = []
    if a["landmass"] == b["landmass"]:
        legs.append(_land_leg(state, mode, a, b, local, avoid))
    else:
        if mode != "transit":
            raise _no_route(f"{a['label']} ({a['landmass']}) and {b['label']} ({b['landmass']}) are separated by "
                            "water with no bridge; try mode 'transit' (ferry)", mode, cause="water")
        if "ferries" in avoid:
            raise _no_route("the only way across the water is a ferry, and ferries are avoided", mode, cause="water")
        legs = _ferry_route(state, a, b, local)
    if mode == "transit" and not _in_service(local, TRANSIT_HOURS):
        raise _no_route(f"no transit service at {local:%H:%M}; service runs 05:00-01:00", mode, cause="no_service")
    km = sum(leg["distance_km"] for leg in legs)
    if mode == "walking" and km > MAX_WALK_KM:
        raise _no_route(f"{km:.1f} km is too far to walk (at most {MAX_WALK_KM:.0f} km)", mode, cause="too_far")
    if mode == "cycling" and km > MAX_CYCLE_KM:
        raise _no_route(f"{km:.1f} km is too far to cycle (at most {MAX_CYCLE_KM:.0f} km)", mode, cause="too_far")
    toll = 0
    if mode == "driving" and (a["district"] in CONGESTION_ZONE or b["district"] in CONGESTION_ZONE):
        toll = _congestion_toll(local)
        if toll and "tolls" in avoid:
            raise _no_route("an end lies inside the congestion-tax zone, which is charged now", mode, cause="tolls")
    minutes = sum(leg["duration_min"] for leg in legs)
    through = sorted({a["district"], b["district"]}, key=[a["district"], b["district"]].index)
    return {
        "mode": mode,
        "origin": _end(a),
        "destination": _end(b),
        "distance_km": round(km, 2),
        "duration_min": minutes,
        "departure_time": _stamp(depart),
        "arrival_time": _stamp(depart + dt.timedelta(minutes=minutes)),
        "summary": f"{mode.title()} via {' and '.join(through)}",
        "legs": legs,
        "toll_sek": toll,
        "warnings": ["rush-hour traffic"] if mode == "driving" and _rush_hour(local) else [],
    }


def _ferry_route(state: MapState, a: Record, b: Record, local: dt.datetime) -> list[Record]:
    """Transit with ferries: each island end goes by ferry to Strömkajen; the mainland part by land."""
    pier = {"label": "Strömkajen Ferry Terminal", "lat": STRÖMKAJEN[0], "lon": STRÖMKAJEN[1], "district": "Norrmalm",
            "landmass": MAINLAND}
    legs: list[Record] = []

    def crossing(island: str, outbound: bool) -> Record:
        (lat, lon), line, season = FERRIES[island]
        if season is not None and not season[0] <= local.month <= season[1]:
            raise _no_route(f"the {line} ferry to {island} sails only in months {season[0]}-{season[1]}", "transit",
                            cause="ferry_season")
        if not _in_service(local, FERRY_HOURS):
            raise _no_route(f"the {line} ferry sails {FERRY_HOURS[0]:02d}:00-{FERRY_HOURS[1]:02d}:00", "transit",
                            cause="no_service")
        km = haversine_km(lat, lon, *STRÖMKAJEN) * 1.1
        ends = ("Strömkajen Ferry Terminal", f"{island} ferry pier")
        start, end = ends if outbound else ends[::-1]
        return _leg("ferry", start, end, km, km / SPEED_KMH["ferry"] * 60 + FERRY_BOARDING_MIN)

    def harbour(island: str) -> Record:
        (lat, lon), _, _ = FERRIES[island]
        hood, _ = _nearest_neighborhood(state, lat, lon)
        return {"label": f"{island} ferry pier", "lat": lat, "lon": lon, "district": hood["name"], "landmass": island}

    if a["landmass"] != MAINLAND:
        start = harbour(a["landmass"])
        if haversine_km(a["lat"], a["lon"], start["lat"], start["lon"]) > 0.05:
            legs.append(_land_leg(state, "walking", a, start, local, set()))
        legs.append(crossing(a["landmass"], outbound=False))
        a = pier
    if b["landmass"] != MAINLAND:
        end = harbour(b["landmass"])
        if haversine_km(a["lat"], a["lon"], pier["lat"], pier["lon"]) > 0.05:
            legs.append(_land_leg(state, "transit", a, pier, local, set()))
        legs.append(crossing(b["landmass"], outbound=True))
        if haversine_km(end["lat"], end["lon"], b["lat"], b["lon"]) > 0.05:
            legs.append(_land_leg(state, "walking", end, b, local, set()))
    elif haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]) > 0.05:
        legs.append(_land_leg(state, "transit", a, b, local, set()))
    return legs


def _end(point: Record) -> Record:
    return {"label": point["label"], "place_id": point["place_id"] if "place_id" in point else None,
            "lat": point["lat"], "lon": point["lon"], "neighborhood": point["district"]}


def _places_near(
    state: MapState, lat: float, lon: float, radius_km: float, category: str | None
) -> list[tuple[float, Record]]:
    """(distance km, place) within the radius, nearest first: looks up the grid squares around the point."""
    filters = {"category": category} if category else {}
    rows, cols = math.ceil(radius_km / 1.1) + 1, math.ceil(radius_km / 1.1) + 1
    row0, col0 = math.floor(lat * 100), math.floor(lon * 50)
    found = []
    for r in range(row0 - rows, row0 + rows + 1):
        for c in range(col0 - cols, col0 + cols + 1):
            for place in state.places.where(cell=f"{r}:{c}", **filters):
                away = haversine_km(lat, lon, place["lat"], place["lon"])
                if away <= radius_km:
                    found.append((away, place))
    found.sort(key=lambda dp: (dp[0], dp[1]["name"]))
    return found


def _card(state: MapState, place: Record, *, distance_km: float | None = None) -> Record:
    """A place as search results show it."""
    card = {k: place[k] for k in ("id", "name", "category", "district", "formatted_address", "lat", "lon", "rating",
                                  "review_count", "price_level")}
    card["open_now"] = _open_state(place, _local(state.now()))["open_now"]
    if distance_km is not None:
        card["distance_m"] = round(distance_km * 1000)
    return card


def _saved_view(state: MapState, entry: Record) -> Record:
    rest = {k: v for k, v in entry.items() if k != "id"}
    return {"saved_place_id": entry["id"], **rest, "place": _card(state, state.places.get(entry["place_id"]))}


def _example_place(s: MapState, **equals: Any) -> str:
    return s.places.first(**equals)["id"]


def _coords(s: MapState, name: str) -> str:
    place = s.places.first(name=name)
    return f"{place['lat']},{place['lon']}"


# -- the server and its tools ---------------------------------------------------------------------------

server = Server(
    "maps",
    domain="travel",
    description="A city map of Stockholm: place search and details, geocoding and reverse geocoding, routes "
    "for driving, walking, cycling and transit, distance matrices, opening hours, nearby search, reviews "
    "and saved places.",
    state=MapState,
    seed=build_map,
    options=MapOptions,
)


@server.tool(
    answers=("formatted_address", "rating", "open_now"),
    read_only=True,
    reads=["place"],
    errors=["INVALID_COORDINATES", "OUTSIDE_SERVICE_AREA", "PLACE_NOT_FOUND"],
    examples=[{"query": "museum"},
              lambda s: {"query": "cafe", "near": _coords(s, "Royal Palace"), "radius_m": 3000, "open_now": True}],
    asks=lambda a: ("find {query} places that are open right now near {near}",
                    "what {query} spots are open at the moment within {radius_m} m of {near}",
                    "search for {query} that's open now") if a.get("open_now") else (
        "search the map for {query}", "look up {query} places", "find {query} within {radius_m} m of {near}",
        "show me {query} spots rated {min_rating} or better", "search for {category} places matching {query}"),
    values={"query": lambda rng, s: rng.choice(PLACE_QUERIES)},
)
def search_places(
    state: MapState,
    query: Annotated[str, Field(min_length=2, max_length=100, description="Words to find in the name, category, "
                                                                           "neighborhood or street; all must match.")],
    category: Annotated[Category | None, Field(description="Only places of this category.")] = None,
    near: Annotated[Location | None, Field(description="Rank by distance from this place id or 'lat,lon'.")] = None,
    radius_m: Annotated[int, Field(ge=50, le=50_000, description="With near: only places this close, in m.")] = 5000,
    open_now: Annotated[bool, Field(description="Only places open at the current local time.")] = False,
    min_rating: Annotated[float | None, Field(ge=1, le=5, description="Only places rated at least this.")] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """Text search over the gazetteer ("sushi Södermalm", "pharmacy", "Götgatan"); accents are
    optional. Returns a page of places (id, name, category, neighborhood, address, coordinates,
    rating, price level, open_now and, with near, distance_m), best match first or nearest first
    with near. An empty list when nothing matches. Fails with INVALID_COORDINATES,
    OUTSIDE_SERVICE_AREA or PLACE_NOT_FOUND for a bad near."""
    terms = _normalize(query).split()
    origin = _resolve(state, near) if near else None
    local = _local(state.now())
    filters = {"category": category} if category else {}
    scored = []
    for place in state.places.where(**filters):
        name = _normalize(place["name"])
        text = f"{name} {place['category'].replace('_', ' ')} {_normalize(place['district'])} " \
               f"{_normalize(place['formatted_address'])}"
        if not all(t in text for t in terms):
            continue
        if min_rating is not None and (place["rating"] or 0) < min_rating:
            continue
        if open_now and not _open_state(place, local)["open_now"]:
            continue
        away = None if origin is None else haversine_km(origin["lat"], origin["lon"], place["lat"], place["lon"])
        if away is not None and away * 1000 > radius_m:
            continue
        relevance = sum(2 if t in name else 1 for t in terms)
        scored.append(((away,) if away is not None else (-relevance, -(place["rating"] or 0)), place, away))
    scored.sort(key=lambda row: row[0])
    cards = [_card(state, place, distance_km=away) for _, place, away in scored]
    return paginate(cards, limit=limit, offset=offset, key="places")


@server.tool(
    answers=("formatted_address", "phone", "rating", "open_now"),
    read_only=True,
    reads=["place", "saved_place"],
    errors=["PLACE_NOT_FOUND"],
    examples=[lambda s: {"place_id": _example_place(s, category="restaurant")}],
    asks=("tell me about {place_id}", "show me the details for {place_id}",
          "what's the address and phone number of {place_id}", "pull up {place_id} on the map"),
)
def get_place(state: MapState, place_id: PlaceId) -> dict:
    """Everything about one place: name, category, full address, coordinates, phone, price level
    (1-4), rating and review count, weekly opening hours, whether it is open now, and which of
    the user's lists it is saved in. Fails with PLACE_NOT_FOUND."""
    place = state.places.get(place_id)
    saved = [s["list_name"] for s in state.saved_places.where(place_id=place_id)]
    return {**{k: v for k, v in place.items() if k != "cell"}, "hours": _hours_view(place["hours"]),
            **_open_state(place, _local(state.now())), "saved_in": saved}


@server.tool(
    answers=("formatted_address", "lat", "lon"),
    read_only=True,
    reads=["place", "neighborhood"],
    errors=["ADDRESS_NOT_FOUND"],
    examples=[lambda s: {"address": s.places.first(category="museum")["formatted_address"]},
              {"address": "Ostermalm"}, {"address": "Royal Palace"}],
    asks=("find the coordinates of {address}", "where exactly is {address}", "look up {address} on the map",
          "give me the lat and long for {address}"),
    values={"address": lambda rng, s: rng.choice((*(name for name, *_ in LANDMARKS), *NEIGHBORHOODS,
                                                  rng.choice(s.places.all())["formatted_address"]))},
)
def geocode(
    state: MapState,
    address: Annotated[str, Field(min_length=2, max_length=200, description="A street address ('Götgatan 12'), a "
                                                                             "place name or a neighborhood.")],
) -> dict:
    """Turn an address, place name or neighborhood into coordinates. Returns up to 5 candidates,
    best first, each with lat, lon, the formatted address, the match type (address, place,
    street, neighborhood) and the place_id when it is a place. Fails with ADDRESS_NOT_FOUND
    when nothing in the gazetteer matches: check the spelling or search_places."""
    needle = _normalize(address)
    street_number = re.match(r"^(.*?)\s+(\d+)\b", needle)
    candidates: list[tuple[int, Record]] = []
    for place in state.places.all():
        full, name = _normalize(place["formatted_address"]), _normalize(place["name"])
        street = _normalize(f"{place['address']['street']} {place['address']['number']}")
        if street_number and (full.startswith(needle) or street == f"{street_number[1]} {street_number[2]}"):
            candidates.append((0, {"match": "address", **_point(place)}))
        elif needle == name or (len(needle) >= 4 and needle in name):
            candidates.append((1 if needle == name else 2, {"match": "place", **_point(place)}))
    for hood in state.neighborhoods:
        if needle == _normalize(hood["name"]) or needle == _normalize(f"{hood['name']} {hood['city']}"):
            candidates.append((1, {"match": "neighborhood", "place_id": None, "name": hood["name"],
                                   "formatted_address": f"{hood['name']}, {hood['city']}", "lat": hood["lat"],
                                   "lon": hood["lon"], "neighborhood": hood["name"]}))
        for street in hood["streets"]:
            if needle == _normalize(street):
                on_street = state.places.where(lambda p, st=street: p["address"]["street"] == st, district=hood["name"])
                if on_street:
                    lat = sum(p["lat"] for p in on_street) / len(on_street)
                    lon = sum(p["lon"] for p in on_street) / len(on_street)
                    candidates.append((3, {"match": "street", "place_id": None, "name": street,
                                           "formatted_address": f"{street}, {hood['postal_code']} {hood['city']}",
                                           "lat": round(lat, 5), "lon": round(lon, 5), "neighborhood": hood["name"]}))
    if not candidates:
        raise NotFound(f"no address, place or neighborhood matches {address!r}", reason="ADDRESS_NOT_FOUND",
                       query=address)
    candidates.sort(key=lambda rc: rc[0])
    return {"query": address, "results": [c for _, c in candidates[:5]], "total": len(candidates)}


def _point(place: Record) -> Record:
    return {"place_id": place["id"], "name": place["name"], "formatted_address": place["formatted_address"],
            "lat": place["lat"], "lon": place["lon"], "neighborhood": place["district"]}


@server.tool(
    answers=("formatted_address", "neighborhood"),
    read_only=True,
    reads=["place", "neighborhood"],
    errors=["INVALID_COORDINATES", "OUTSIDE_SERVICE_AREA", "ADDRESS_NOT_FOUND"],
    examples=[lambda s: {"coordinates": _coords(s, "Royal Palace")}, {"coordinates": "59.3160,18.0730"}],
    asks=("what's the address at {coordinates}", "which street is at {coordinates}",
          "tell me what's at the coordinates {coordinates}", "what neighborhood is {coordinates} in"),
    values={"coordinates": lambda rng, s: (lambda c: f"{c[0] + rng.uniform(-0.004, 0.004):.4f},"
                                                     f"{c[1] + rng.uniform(-0.004, 0.004):.4f}")(
        rng.choice(list(NEIGHBORHOODS.values())))},
)
def reverse_geocode(state: MapState, coordinates: Coordinates) -> dict:
    """The address at a point: the nearest street address within 250 m (with its place), else the
    neighborhood whose centre is within 2.5 km. Fails with ADDRESS_NOT_FOUND for a point with
    nothing near it (open water, forest), INVALID_COORDINATES (latitude beyond ±90, longitude
    beyond ±180) or OUTSIDE_SERVICE_AREA (more than 80 km from Stockholm)."""
    lat, lon = _parse_coordinates(coordinates)
    nearest = _places_near(state, lat, lon, NEAR_ADDRESS_M / 1000, None)
    if nearest:
        away, place = nearest[0]
        return {"coordinates": coordinates, "match": "address", "distance_m": round(away * 1000), **_point(place)}
    hood, away = _nearest_neighborhood(state, lat, lon)
    require(away <= NEAR_NEIGHBORHOOD_KM, f"nothing is mapped near {coordinates}; the nearest neighborhood, "
            f"{hood['name']}, is {away:.1f} km away", reason="ADDRESS_NOT_FOUND", error=NotFound)
    return {"coordinates": coordinates, "match": "neighborhood", "distance_m": round(away * 1000), "place_id": None,
            "name": hood["name"], "formatted_address": f"{hood['name']}, {hood['city']}", "lat": hood["lat"],
            "lon": hood["lon"], "neighborhood": hood["name"]}


RouteErrors = ["PLACE_NOT_FOUND", "INVALID_COORDINATES", "OUTSIDE_SERVICE_AREA", "SAME_ORIGIN_DESTINATION",
               "NO_ROUTE", "BAD_DATE", "DEPARTURE_TIME_IN_PAST"]
Avoid = Annotated[list[Literal["tolls", "highways", "ferries"]], Field(
    max_length=3, description="What the route should avoid: tolls (the congestion-tax zone), highways, ferries.")]


@server.tool(
    answers=("distance_km", "duration_min", "arrival_time"),
    read_only=True,
    reads=["place", "neighborhood"],
    errors=RouteErrors,
    examples=[
        lambda s: {"origin": _example_place(s, name="Stockholm Central Station"),
                   "destination": _example_place(s, name="Vasa Museum"), "mode": "walking"},
        lambda s: {"origin": _example_place(s, name="Royal Palace"),
                   "destination": _example_place(s, name="Sandhamn Harbour"), "mode": "transit"},
        lambda s: {"origin": _coords(s, "Stockholm Arlanda Airport"),
                   "destination": _example_place(s, name="Royal Palace"), "mode": "driving", "avoid": ["highways"],
                   "departure_time": "2026-03-03T08:00"},
    ],
    asks=("get directions from {origin} to {destination}", "give me {mode} directions from {origin} to {destination}",
          "plan a route from {origin} to {destination} avoiding {avoid}",
          "route me from {origin} to {destination}, leaving at {departure_time}",
          "how long does it take to get from {origin} to {destination}"),
    values={"departure_time": lambda rng, s: (_local(s.now()).date() + dt.timedelta(days=rng.randint(1, 6))).isoformat()
            + rng.choice(("T07:45", "T08:00", "T09:30", "T12:15", "T17:30", "T19:00"))},
)
def get_route(
    state: MapState,
    origin: Annotated[Location, Field(description="Start: a place id (plc_...) or coordinates 'lat,lon'.")],
    destination: Annotated[Location, Field(description="End: a place id (plc_...) or coordinates 'lat,lon'.")],
    mode: Annotated[Mode, Field(description="How to travel.")] = "driving",
    avoid: Avoid = [],  # noqa: B006 - the schema default; never mutated
    departure_time: DepartureTime = None,
) -> dict:
    """A route between two points: distance_km, duration_min, departure and arrival times (local),
    a summary, its legs (walk, transit, ferry, drive, cycle) and any congestion toll in SEK.
    Fails with NO_ROUTE when the mode cannot make the trip (water with no bridge: only transit
    reaches the islands; more than 20 km walking or 60 km cycling; no transit 01:00-05:00;
    a ferry out of season; an avoided toll or ferry that cannot be avoided), with
    SAME_ORIGIN_DESTINATION, DEPARTURE_TIME_IN_PAST, BAD_DATE, or for a bad origin or destination
    PLACE_NOT_FOUND, INVALID_COORDINATES or OUTSIDE_SERVICE_AREA."""
    depart = _departure(state, departure_time)
    return _plan(state, _resolve(state, origin), _resolve(state, destination), mode, depart, set(avoid))


@server.tool(
    read_only=True,
    reads=["place", "neighborhood"],
    errors=RouteErrors,
    examples=[lambda s: {"origin": _example_place(s, name="Vasa Museum"),
                         "destination": _example_place(s, name="Fjäderholmarna Ferry Pier")}],
    asks=("compare ways to get from {origin} to {destination}", "what's the fastest way from {origin} to {destination}",
          "should I drive, walk, bike or take transit from {origin} to {destination}",
          "compare every travel option from {origin} to {destination} leaving at {departure_time}"),
    values={"departure_time": lambda rng, s: (_local(s.now()).date() + dt.timedelta(days=rng.randint(1, 6))).isoformat()
            + rng.choice(("T07:45", "T08:00", "T09:30", "T12:15", "T17:30", "T19:00"))},
)
def compare_travel_modes(
    state: MapState,
    origin: Annotated[Location, Field(description="Start: a place id (plc_...) or coordinates 'lat,lon'.")],
    destination: Annotated[Location, Field(description="End: a place id (plc_...) or coordinates 'lat,lon'.")],
    departure_time: DepartureTime = None,
) -> dict:
    """The same trip by every mode at once: for driving, walking, cycling and transit either
    status OK with distance_km, duration_min and toll_sek, or status NO_ROUTE with the reason;
    plus the fastest mode that works (null when none does). Fails only for a bad origin or
    destination (PLACE_NOT_FOUND, INVALID_COORDINATES, OUTSIDE_SERVICE_AREA),
    SAME_ORIGIN_DESTINATION, DEPARTURE_TIME_IN_PAST or BAD_DATE."""
    depart = _departure(state, departure_time)
    a, b = _resolve(state, origin), _resolve(state, destination)
    options = {}
    for mode in MODES:
        try:
            route = _plan(state, a, b, mode, depart, set())
            options[mode] = {"status": "OK", "distance_km": route["distance_km"], "duration_min": route["duration_min"],
                             "toll_sek": route["toll_sek"], "arrival_time": route["arrival_time"]}
        except ToolError as exc:
            if exc.reason != "NO_ROUTE":
                raise
            options[mode] = {"status": "NO_ROUTE", "reason": exc.message}
    working = [(o["duration_min"], m) for m, o in options.items() if o["status"] == "OK"]
    return {"origin": _end(a), "destination": _end(b), "departure_time": _stamp(depart), "modes": options,
            "fastest": min(working)[1] if working else None}


@server.tool(
    read_only=True,
    reads=["place", "neighborhood"],
    errors=["PLACE_NOT_FOUND", "INVALID_COORDINATES", "OUTSIDE_SERVICE_AREA", "TOO_MANY_ELEMENTS"],
    examples=[lambda s: {"origins": [_example_place(s, name="Stockholm Central Station"), _coords(s, "Royal Palace")],
                         "destinations": [_example_place(s, name="Vasa Museum"),
                                          _example_place(s, name="Sandhamn Harbour")], "mode": "cycling"}],
    asks=("how far is each of {origins} from each of {destinations}",
          "give me {mode} distances and times from {origins} to {destinations}",
          "compare travel times from {origins} to {destinations}",
          "work out a distance table between {origins} and {destinations}"),
)
def get_distance_matrix(
    state: MapState,
    origins: Annotated[list[Location], ref("place", "Start points: place ids or 'lat,lon' coordinates.",
                                           min_length=1, max_length=25)],
    destinations: Annotated[list[Location], ref("place", "End points: place ids or 'lat,lon'.",
                                                min_length=1, max_length=25)],
    mode: Annotated[Mode, Field(description="How to travel.")] = "driving",
) -> dict:
    """Distance and travel time from every origin to every destination, leaving now: rows follow
    origins, elements follow destinations, each with status OK (distance_km, duration_min),
    NO_ROUTE (with the reason) or ZERO (same point). At most 25 elements (origins x
    destinations) per request: more fails with TOO_MANY_ELEMENTS, so split the request. Fails
    with PLACE_NOT_FOUND, INVALID_COORDINATES or OUTSIDE_SERVICE_AREA for any bad point."""
    elements = len(origins) * len(destinations)
    require(elements <= MATRIX_MAX_ELEMENTS, f"{len(origins)} x {len(destinations)} = {elements} elements; at most "
            f"{MATRIX_MAX_ELEMENTS} per request: split it", reason="TOO_MANY_ELEMENTS", error=ResourceExhausted,
            elements=elements, limit=MATRIX_MAX_ELEMENTS)
    starts = [_resolve(state, o) for o in origins]
    ends = [_resolve(state, d) for d in destinations]
    rows = []
    for a in starts:
        row = []
        for b in ends:
            if haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]) < 0.01:
                row.append({"status": "ZERO", "distance_km": 0.0, "duration_min": 0})
                continue
            try:
                route = _plan(state, a, b, mode, state.now(), set())
                row.append({"status": "OK", "distance_km": route["distance_km"], "duration_min": route["duration_min"]})
            except ToolError as exc:
                row.append({"status": "NO_ROUTE", "reason": exc.message})
        rows.append({"origin": a["label"], "elements": row})
    return {"mode": mode, "origins": [a["label"] for a in starts], "destinations": [b["label"] for b in ends],
            "rows": rows}


@server.tool(
    answers=("open", "close", "open_24h"),
    read_only=True,
    reads=["place"],
    errors=["PLACE_NOT_FOUND", "BAD_DATE"],
    examples=[lambda s: {"place_id": _example_place(s, name="Royal Palace")},
              lambda s: {"place_id": _example_place(s, category="bar"), "date": "2026-03-07"}],
    asks=("what are the opening hours of {place_id}", "when is {place_id} open on {date}",
          "show me the weekly hours for {place_id}", "check the hours of {place_id} for {date}"),
    values={"date": lambda rng, s: (_local(s.now()).date() + dt.timedelta(days=rng.randint(1, 10))).isoformat()},
)
def get_opening_hours(
    state: MapState,
    place_id: PlaceId,
    date: Annotated[str | None, Field(pattern=ISO_DATE,
                                      description="Day to show the hours for, YYYY-MM-DD; default today.")] = None,
) -> dict:
    """A place's weekly opening hours (per weekday: open/close times, empty = closed; a close at or
    before the opening time is after midnight) and its hours on one date, default today (local
    time). Fails with PLACE_NOT_FOUND or BAD_DATE."""
    place = state.places.get(place_id)
    day = parse_date(date, "date") if date else _local(state.now()).date()
    weekly = _hours_view(place["hours"])
    weekday = DAYS[day.weekday()]
    return {"place_id": place_id, "name": place["name"], "open_24h": _open_24h(place), "weekly": weekly,
            "date": day.isoformat(), "weekday": weekday, "hours_on_date": weekly[weekday],
            "closed_on_date": not weekly[weekday]}


@server.tool(
    answers=("open_now", "closes_at", "next_open"),
    read_only=True,
    reads=["place"],
    errors=["PLACE_NOT_FOUND"],
    examples=[lambda s: {"place_id": _example_place(s, name="Vasa Museum")},
              lambda s: {"place_id": _example_place(s, category="cafe")}],
    asks=("is {place_id} open right now", "can I still go to {place_id} now or is it closed",
          "check whether {place_id} is open at the moment"),
)
def is_open_now(state: MapState, place_id: PlaceId) -> dict:
    """Whether a place is open at the current local time, with the local time, when it closes
    (null if open around the clock or closed) and when it next opens (null if open). Fails with
    PLACE_NOT_FOUND."""
    place = state.places.get(place_id)
    local = _local(state.now())
    return {"place_id": place_id, "name": place["name"], "local_time": local.isoformat(timespec="minutes"),
            **_open_state(place, local)}


@server.tool(
    answers=("distance_m", "rating", "open_now"),
    read_only=True,
    reads=["place"],
    errors=["PLACE_NOT_FOUND", "INVALID_COORDINATES", "OUTSIDE_SERVICE_AREA"],
    examples=[lambda s: {"location": _example_place(s, name="Stockholm Central Station"), "radius_m": 800},
              lambda s: {"location": _coords(s, "Royal Palace"), "radius_m": 1500, "category": "cafe",
                         "open_now": True}],
    asks=lambda a: ("find {category} places near {location} that are open now",
                    "what's open right now within {radius_m} m of {location}",
                    "show me what's open near {location} at the moment") if a.get("open_now") else (
        "what's near {location}", "show me places within {radius_m} m of {location}",
        "find {category} spots around {location}", "list what's close to {location}, within {radius_m} metres"),
)
def nearby_search(
    state: MapState,
    location: Annotated[Location, Field(description="Centre of the search: a place id or 'lat,lon'.")],
    radius_m: Annotated[int, Field(ge=50, le=5000, description="Search radius in metres (50-5000).")] = 1000,
    category: Annotated[Category | None, Field(description="Only places of this category.")] = None,
    open_now: Annotated[bool, Field(description="Only places open at the current local time.")] = False,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """Places within a radius of a point, nearest first, each with distance_m (the centre place
    itself is left out). Returns the page, total and next_offset; an empty list when nothing is
    that close. Fails with PLACE_NOT_FOUND, INVALID_COORDINATES or OUTSIDE_SERVICE_AREA."""
    centre = _resolve(state, location)
    local = _local(state.now())
    found = [
        _card(state, place, distance_km=away)
        for away, place in _places_near(state, centre["lat"], centre["lon"], radius_m / 1000, category)
        if place["id"] != centre["place_id"] and (not open_now or _open_state(place, local)["open_now"])
    ]
    return {"centre": _end(centre), "radius_m": radius_m, **paginate(found, limit=limit, offset=offset, key="places")}


@server.tool(
    answers=("detour_m", "km_from_origin", "rating"),
    read_only=True,
    reads=["place", "neighborhood"],
    errors=RouteErrors,
    examples=[lambda s: {"origin": _example_place(s, name="Stockholm Arlanda Airport"),
                         "destination": _example_place(s, name="Royal Palace"), "category": "gas_station",
                         "max_detour_m": 3000}],
    asks=("find {category} stops on the way from {origin} to {destination}",
          "are there any {category} places along the route from {origin} to {destination}",
          "look for {category} spots between {origin} and {destination}, at most {max_detour_m} m off the route",
          "search for {category} places on my {mode} route from {origin} to {destination}"),
)
def search_along_route(
    state: MapState,
    origin: Annotated[Location, Field(description="Start: a place id (plc_...) or coordinates 'lat,lon'.")],
    destination: Annotated[Location, Field(description="End: a place id (plc_...) or coordinates 'lat,lon'.")],
    category: Annotated[Category, Field(description="What to find on the way.")],
    mode: Annotated[Mode, Field(description="How to travel.")] = "driving",
    max_detour_m: Annotated[int, Field(ge=100, le=5000, description="Farthest a stop may be off the route, m.")] = 1000,
    limit: Limit = 10,
) -> dict:
    """Places of one category on the way from origin to destination, in the order you pass them,
    each with detour_m (off the route) and km_from_origin, plus the route's distance and
    duration. Fails with NO_ROUTE when the mode cannot make the trip, and like get_route for a
    bad origin or destination (PLACE_NOT_FOUND, INVALID_COORDINATES, OUTSIDE_SERVICE_AREA,
    SAME_ORIGIN_DESTINATION, DEPARTURE_TIME_IN_PAST, BAD_DATE)."""
    a, b = _resolve(state, origin), _resolve(state, destination)
    route = _plan(state, a, b, mode, state.now(), set())
    # Project onto the straight segment in a local flat frame (km east, km north of the origin).
    kx = 111.32 * math.cos(math.radians(a["lat"]))
    bx, by = (b["lon"] - a["lon"]) * kx, (b["lat"] - a["lat"]) * 110.57
    length2 = bx * bx + by * by
    stops = []
    for place in state.places.where(category=category):
        if mode != "transit" and place["landmass"] != a["landmass"]:
            continue
        px, py = (place["lon"] - a["lon"]) * kx, (place["lat"] - a["lat"]) * 110.57
        t = max(0.0, min(1.0, (px * bx + py * by) / length2))
        off = math.hypot(px - t * bx, py - t * by)
        if off * 1000 <= max_detour_m:
            stops.append((t, off, place))
    stops.sort(key=lambda row: (row[0], row[2]["name"]))
    found = [{**_card(state, place), "detour_m": round(off * 1000),
              "km_from_origin": round(t * route["distance_km"], 1)} for t, off, place in stops[:limit]]
    return {"route": {k: route[k] for k in ("mode", "distance_km", "duration_min", "summary")}, "places": found,
            "total": len(stops)}


@server.tool(
    answers=("rating", "text", "date"),
    read_only=True,
    reads=["place", "review"],
    errors=["PLACE_NOT_FOUND"],
    examples=[lambda s: {"place_id": s.reviews.first()["place_id"]},
              lambda s: {"place_id": s.reviews.first()["place_id"], "sort": "lowest", "min_rating": 2, "limit": 5}],
    asks=("show the reviews of {place_id}", "what are people saying about {place_id}",
          "list the {sort} reviews for {place_id}", "show me reviews of {place_id} with at least {min_rating} stars",
          "read me {limit} reviews of {place_id}"),
)
def list_place_reviews(
    state: MapState,
    place_id: PlaceId,
    sort: Annotated[Literal["newest", "highest", "lowest"], Field(description="Review order.")] = "newest",
    min_rating: Annotated[int | None, Field(ge=1, le=5, description="Only reviews with at least this rating.")] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict:
    """A place's reviews (author, 1-5 stars, text, date) with its average rating and a star
    histogram; a page of reviews, total and next_offset. Fails with PLACE_NOT_FOUND."""
    place = state.places.get(place_id)
    reviews = state.reviews.where(place_id=place_id)
    histogram = {str(star): sum(r["rating"] == star for r in reviews) for star in range(1, 6)}
    shown = [r for r in reviews if min_rating is None or r["rating"] >= min_rating]
    orders = {"newest": lambda r: r["date"], "highest": lambda r: (r["rating"], r["date"]),
              "lowest": lambda r: (-r["rating"], r["date"])}
    shown.sort(key=orders[sort], reverse=True)
    return {"place_id": place_id, "name": place["name"], "rating": place["rating"], "histogram": histogram,
            **paginate(shown, limit=limit, offset=offset, key="reviews")}


@server.tool(
    answers=("city", "place_count"),
    read_only=True,
    reads=["neighborhood", "place"],
    examples=[{}],
    asks=("which neighborhoods does the map cover", "list the neighborhoods",
          "show me all the areas of the city you know"),
)
def list_neighborhoods(state: MapState) -> dict:
    """The neighborhoods the map covers: centre coordinates, city, landmass, how to get there
    (bridge, or the ferry line and its season for islands), whether it lies in the congestion-tax
    zone, and how many places it has."""
    out = []
    for hood in state.neighborhoods:
        ferry = FERRIES.get(hood["landmass"])
        access = "road" if ferry is None else f"ferry ({ferry[1]}" + (
            f", months {ferry[2][0]}-{ferry[2][1]})" if ferry[2] else ", all year)")
        out.append({k: hood[k] for k in ("name", "lat", "lon", "city", "landmass", "congestion_zone")} |
                   {"access": access, "place_count": len(state.places.where(district=hood["name"]))})
    return {"neighborhoods": out}


@server.tool(
    idempotent=True,  # saving the same place to the same list again is refused with PLACE_ALREADY_SAVED
    reads=["place", "saved_place"],
    produces=["saved_place"],
    errors=["PLACE_NOT_FOUND", "PLACE_ALREADY_SAVED", "SAVED_LIST_FULL"],
    examples=[lambda s: {"place_id": s.places.first(lambda p: not s.saved_places.where(place_id=p["id"]))["id"],
                         "list_name": "want_to_go", "note": "Try the cinnamon buns"}],
    asks=("save {place_id} to my {list_name} list", "add {place_id} to {list_name} with the note \"{note}\"",
          "bookmark {place_id}", "put {place_id} on my {list_name} list"),
    values={"list_name": lambda rng, s: rng.choice(("favorites", "want_to_go", "starred")),
            "note": lambda rng, s: rng.choice(PLACE_NOTES)},
)
def save_place(
    state: MapState,
    place_id: PlaceId,
    list_name: Annotated[ListName, Field(description="Which of the user's lists to save it in.")] = "favorites",
    note: Annotated[str | None, Field(max_length=200, description="Optional private note.")] = None,
) -> dict:
    """Save a place to one of the user's lists (favorites, want_to_go, starred). Returns the saved
    entry (saved_place_id). Fails with PLACE_ALREADY_SAVED when it already is in that list, and
    SAVED_LIST_FULL when the list holds 30 places (remove one first)."""
    place = state.places.get(place_id)
    existing = state.saved_places.first(place_id=place_id, list_name=list_name)
    if existing is not None:
        raise Conflict(f"{place['name']} is already in {list_name}", reason="PLACE_ALREADY_SAVED",
                       saved_place_id=existing["id"])
    require(len(state.saved_places.where(list_name=list_name)) < MAX_SAVED_PER_LIST,
            f"{list_name} already holds {MAX_SAVED_PER_LIST} places; remove one first", reason="SAVED_LIST_FULL",
            error=ResourceExhausted, limit=MAX_SAVED_PER_LIST)
    saved = state.saved_places.insert({"place_id": place_id, "list_name": list_name, "note": note,
                                       "saved_at": state.now().isoformat()})
    return _saved_view(state, saved)


@server.tool(
    answers=("list_name", "formatted_address"),
    read_only=True,
    reads=["saved_place", "place"],
    examples=[{}, {"list_name": "favorites"}],
    asks=("show my saved places", "what's on my {list_name} list", "list everything I've saved on the map",
          "show me my {list_name} places"),
)
def list_saved_places(
    state: MapState,
    list_name: Annotated[ListName | None, Field(description="Only this list; all lists when omitted.")] = None,
) -> dict:
    """The user's saved places, newest first: saved_place_id, list, note, when it was saved and
    the place (name, address, coordinates, rating, open_now); plus a count per list."""
    filters = {"list_name": list_name} if list_name else {}
    entries = sorted(state.saved_places.where(**filters), key=lambda e: e["saved_at"], reverse=True)
    counts = {name: len(state.saved_places.where(list_name=name)) for name in ("favorites", "want_to_go", "starred")}
    return {"saved_places": [_saved_view(state, e) for e in entries], "counts": counts}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat finds nothing to remove (SAVED_PLACE_NOT_FOUND)
    reads=["saved_place"],
    mutates=["saved_place"],
    errors=["SAVED_PLACE_NOT_FOUND"],
    examples=[lambda s: {"saved_place_id": s.saved_places.first()["id"]}],
    asks=("remove {saved_place_id}", "take {saved_place_id} off my list",
          "delete {saved_place_id} from my saved places"),
)
def remove_saved_place(
    state: MapState,
    saved_place_id: Annotated[str, ref("saved_place", "Id of the saved entry (sav_...), from list_saved_places.")],
) -> dict:
    """Remove a place from the list it was saved in (the place itself stays on the map). Returns
    the removed entry. Fails with SAVED_PLACE_NOT_FOUND."""
    removed = state.saved_places.delete(saved_place_id)
    return {"removed": True, **_saved_view(state, removed)}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
