"""travel_booking — an online travel agency for one signed-in member: flights with fare rules and
seat maps, hotels with room rates, bookings, changes, cancellations, travellers and loyalty points.

The state (``TravelState``), the seed (``build_travel``) and the 20 tools live here together. The
rules a real agency enforces are typed failures an agent can recover from:

- Fares come in families with rules copied onto the booking: basic economy cannot be changed or
  get seats chosen; standard can be changed for a fee; flex and business are refundable. A
  refund of a non-refundable fare returns only the taxes. Fare buckets sell out (FARE_SOLD_OUT).
- Flights and stays cannot start in the past (the session clock); a flight is changed only to
  another flight on the same route, paying the fare difference (a cheaper fare refunds nothing)
  plus the change fee per passenger.
- International flights need every traveller's passport, valid on the day of travel.
- Points: earned when booking (per USD of base fare, by fare family; 5 per USD on hotels),
  reversed on cancellation, redeemable at 1 cent each against the fare but not the taxes.

All times are UTC. Schedules are published 11 days ahead; a few days of past flights remain so
there are completed trips.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import random
from typing import Annotated, Any, Literal

import attrs
from pydantic import Field

from prove_core import hookimpl
from prove_core.toolkit import (
    ISO_DATE,
    Conflict,
    InvalidArgument,
    NotFound,
    Record,
    ResourceExhausted,
    Server,
    State,
    Table,
    fake,
    iso_datetime,
    lookup,
    money,
    paginate,
    parse_date,
    part_of,
    ref,
    require,
    require_found,
)
from prove_core.toolkit.helpers import haversine_km

# -- vocabulary -----------------------------------------------------------------------------------

Cabin = Literal["economy", "business"]
RatePlan = Literal["flexible", "non_refundable"]

DAYS_BACK = 2  # flights already flown, for completed trips
DAYS_AHEAD = 11  # the published schedule ends this many days after today
MAX_PASSENGERS = 9
MAX_NIGHTS = 30
MAX_TRAVELLERS = 9
MIN_REDEMPTION = 1000
POINT_VALUE = 0.01  # USD per point
HOTEL_EARN_PER_USD = 5
HOTEL_TAX_RATE = 0.14
WEEKEND_UPLIFT = 1.15  # Friday and Saturday nights
NON_REFUNDABLE_DISCOUNT = 0.12
FREE_CANCELLATION_HOURS = 48  # before check-in, on the flexible rate
CHECK_IN_TIME, CHECK_OUT_TIME = dt.time(15, 0), dt.time(11, 0)
EXTRA_LEGROOM_FEE = 35.0

# code → (airport, city, country, lat, lon, streets for hotel addresses)
AIRPORTS: dict[str, tuple[str, str, str, float, float, tuple[str, ...]]] = {
    "JFK": ("John F. Kennedy International", "New York", "US", 40.6413, -73.7781,
            ("Lexington Ave", "W 44th St", "Broadway")),
    "LAX": ("Los Angeles International", "Los Angeles", "US", 33.9416, -118.4085,
            ("Wilshire Blvd", "S Figueroa St", "Sunset Blvd")),
    "SFO": ("San Francisco International", "San Francisco", "US", 37.6213, -122.3790,
            ("Market St", "Geary St", "Mission St")),
    "SEA": ("Seattle-Tacoma International", "Seattle", "US", 47.4502, -122.3088,
            ("Pike St", "1st Ave", "Westlake Ave")),
    "BOS": ("Boston Logan International", "Boston", "US", 42.3656, -71.0096,
            ("Boylston St", "Tremont St", "Atlantic Ave")),
    "MIA": ("Miami International", "Miami", "US", 25.7959, -80.2870, ("Collins Ave", "Brickell Ave", "Ocean Dr")),
    "ORD": ("Chicago O'Hare International", "Chicago", "US", 41.9742, -87.9073,
            ("N Michigan Ave", "W Madison St", "N Wabash Ave")),
    "DEN": ("Denver International", "Denver", "US", 39.8561, -104.6737, ("17th St", "Larimer St", "Broadway")),
    "ATL": ("Hartsfield-Jackson Atlanta International", "Atlanta", "US", 33.6407, -84.4277,
            ("Peachtree St NE", "Spring St NW")),
    "AUS": ("Austin-Bergstrom International", "Austin", "US", 30.1975, -97.6664, ("Congress Ave", "E 6th St")),
    "YYZ": ("Toronto Pearson International", "Toronto", "CA", 43.6777, -79.6248,
            ("King St W", "Front St W", "Yonge St")),
    "MEX": ("Mexico City International", "Mexico City", "MX", 19.4361, -99.0719,
            ("Paseo de la Reforma", "Av. Insurgentes Sur")),
    "LHR": ("London Heathrow", "London", "GB", 51.4700, -0.4543, ("Strand", "Piccadilly", "Kensington High St")),
    "CDG": ("Paris Charles de Gaulle", "Paris", "FR", 49.0097, 2.5479, ("Rue de Rivoli", "Boulevard Haussmann")),
}
# The busiest routes come first so that any seed has a domestic trunk route with three daily
# flights (JFK-LAX) and an international one (JFK-LHR); the rest follow in a seeded order.
PRIORITY_ROUTES = (("JFK", "LAX"), ("SFO", "SEA"), ("BOS", "MIA"), ("JFK", "LHR"), ("ORD", "DEN"), ("ATL", "AUS"))
AIRLINES = (("Meridian Airways", "MR"), ("Northstar Air", "NS"), ("Pacific Crest Airlines", "PC"),
            ("Atlantic Blue", "AB"))
SLOTS = ((7, 5), (12, 40), (18, 15))  # departure times of the day's flights on a route (UTC)


@attrs.frozen
class FareFamily:
    cabin: str
    family: str
    price_factor: float  # times the basic economy fare
    refundable: bool
    changeable: bool
    change_fee: float  # per passenger
    cancel_fee: float  # per passenger, refundable fares only
    seat_selection: bool
    checked_bags: int
    earn_per_usd: int  # loyalty points per USD of base fare


FARE_FAMILIES = (
    FareFamily("economy", "basic", 1.0, False, False, 0.0, 0.0, False, 0, 2),
    FareFamily("economy", "standard", 1.3, False, True, 75.0, 0.0, True, 1, 5),
    FareFamily("economy", "flex", 1.9, True, True, 0.0, 50.0, True, 1, 8),
    FareFamily("business", "flex", 3.6, True, True, 0.0, 0.0, True, 2, 12),
)
FAMILY = {(f.cabin, f.family): f for f in FARE_FAMILIES}
# Seat layout (every aircraft): business rows 1-4 in a 2-2 layout, economy rows 10-31 in 3-3.
CABIN_LAYOUT = {"business": (range(1, 5), "ACDF"), "economy": (range(10, 32), "ABCDEF")}
CABIN_SEATS = {cabin: [f"{row}{letter}" for row in rows for letter in letters]
               for cabin, (rows, letters) in CABIN_LAYOUT.items()}
EXIT_ROWS = (16, 17)  # extra legroom, EXTRA_LEGROOM_FEE each
SEAT_TYPE = {"A": "window", "F": "window", "C": "aisle", "D": "aisle", "B": "middle", "E": "middle"}

HOTEL_BRANDS = ("Harborview", "Grand Meridian", "Cedar & Stone", "Lumen", "The Wayfarer", "Parkside", "Northlight")
HOTEL_SUFFIXES = ("Hotel", "Suites", "Inn")
AMENITIES = ("free_wifi", "breakfast", "pool", "gym", "parking", "spa", "airport_shuttle", "pet_friendly")
ROOM_TYPES = (("Standard Queen", "1 queen bed", 2, 1.0), ("Deluxe King", "1 king bed", 2, 1.3),
              ("Family Suite", "2 queen beds and a sofa bed", 5, 1.8))

AirportCode = Annotated[str, Field(pattern=r"^[A-Za-z]{3}$", description="3-letter IATA airport code, e.g. JFK.")]
BookingId = Annotated[str, ref("booking", "Id of a booking (bkg_...), from list_bookings or a booking tool.")]
FlightId = Annotated[str, ref("flight", "Id of a flight (flt_...), from search_flights.")]
HotelId = Annotated[str, ref("hotel", "Id of a hotel (htl_...), from search_hotels.")]
CheckIn = Annotated[str, Field(pattern=ISO_DATE, description="Check-in date, YYYY-MM-DD.")]
CheckOut = Annotated[str, Field(pattern=ISO_DATE, description="Check-out date, YYYY-MM-DD (after check-in).")]
Guests = Annotated[int, Field(ge=1, le=8, description="Number of guests in the room.")]


# -- state and seed ---------------------------------------------------------------------------------


class TravelState(State):
    """The agency as one signed-in member sees it: the flight schedule with its fare buckets, the
    hotel inventory, the member's travellers, bookings and loyalty account."""

    flights = Table("flight", prefix="flt", index=("route", "date"))
    fares = Table("fare", prefix="far", index=("flight_id",))
    hotels = Table("hotel", prefix="htl", index=("city_code",))
    rooms = Table("room", prefix="rm", index=("hotel_id",))
    travellers = Table("traveller", prefix="trv")
    bookings = Table("booking", prefix="bkg", index=("kind", "status"))
    loyalty_accounts = Table("loyalty_account", prefix="lty")
    loyalty_activity = Table("loyalty_activity", prefix="lta", index=("booking_id",))


@attrs.frozen(kw_only=True)
class TravelOptions:
    """Seed size: how many city pairs are flown (each both ways, daily); hotels grow with it."""

    routes: int = attrs.field(default=6, validator=attrs.validators.gt(0))


def build_travel(rng: random.Random, options: TravelOptions) -> TravelState:
    """The schedule (past few days to two weeks ahead), hotels in every airport city, the member's
    travellers and loyalty account, and bookings in every state a task needs."""
    state = TravelState(salt=str(rng.random()))
    _seed_schedule(state, rng, options.routes)
    _seed_hotels(state, rng, 1 + math.ceil(options.routes / 3))
    _seed_member(state, rng)
    _seed_bookings(state, rng)
    return state


def _routes(rng: random.Random, count: int) -> list[tuple[str, str]]:
    rest = [(a, b) for i, a in enumerate(AIRPORTS) for b in list(AIRPORTS)[i + 1:]
            if (a, b) not in PRIORITY_ROUTES and (b, a) not in PRIORITY_ROUTES]
    rng.shuffle(rest)
    pairs = [*PRIORITY_ROUTES, *rest]
    # Beyond the distinct pairs, a second airline flies the same pair.
    return [pairs[i % len(pairs)] for i in range(count)]


def _seed_schedule(state: TravelState, rng: random.Random, count: int) -> None:
    today = state.today()
    for index, (a, b) in enumerate(_routes(rng, count)):
        airline, code = AIRLINES[index % len(AIRLINES)]
        daily = 3 if index == 0 else rng.choice((1, 2))
        km = haversine_km(AIRPORTS[a][3], AIRPORTS[a][4], AIRPORTS[b][3], AIRPORTS[b][4])
        basic = 39 + 0.075 * km * rng.uniform(0.85, 1.2)
        for direction, (origin, destination) in enumerate(((a, b), (b, a))):
            for slot in range(daily):
                number = f"{code}{100 + 10 * index + 2 * slot + direction}"
                hour, minute = SLOTS[slot] if daily == 3 else SLOTS[(slot * 2 + index) % 3]
                for day in range(-DAYS_BACK, DAYS_AHEAD + 1):
                    departure = dt.datetime.combine(today + dt.timedelta(days=day), dt.time(hour, minute),
                                                    tzinfo=dt.UTC)
                    _seed_flight(state, rng, number, airline, origin, destination, km, departure, basic, day)


def _seed_flight(state: TravelState, rng: random.Random, number: str, airline: str, origin: str,
                 destination: str, km: float, departure: dt.datetime, basic: float, days_ahead: int) -> None:
    minutes = round(km / 800 * 60 + 30)
    occupied = []
    for cabin, seats in CABIN_SEATS.items():  # one random byte per seat: taken when below the load factor
        load = round(256 * (rng.uniform(0.2, 0.8) if cabin == "business" else rng.uniform(0.35, 0.85)))
        occupied += [seat for seat, byte in zip(seats, rng.randbytes(len(seats))) if byte < load]
    flight = state.flights.insert({
        "flight_number": number,
        "airline": airline,
        "origin": origin,
        "destination": destination,
        "route": f"{origin}-{destination}",
        "date": departure.date().isoformat(),
        "departure": iso_datetime(departure),
        "arrival": iso_datetime(departure + dt.timedelta(minutes=minutes)),
        "duration_min": minutes,
        "distance_km": round(km),
        "aircraft": "A320neo" if km < 2500 else "B787-9",
        "international": AIRPORTS[origin][2] != AIRPORTS[destination][2],
        "occupied_seats": " ".join(occupied),
    })
    late_booking = 1.25 if days_ahead <= 3 else 1.0  # close-in fares cost more
    base = basic * rng.uniform(0.9, 1.15) * late_booking
    international_fee = 60.0 if flight["international"] else 0.0
    for fam in FARE_FAMILIES:
        price = float(round(base * fam.price_factor))
        if fam.family == "basic":
            seats = rng.choice((0, 2, 4, 7, 9))  # basic buckets sell out first
        elif fam.family == "standard":
            seats = rng.randint(4, 30)
        else:
            seats = rng.randint(0, 8) if fam.cabin == "business" else rng.randint(1, 9)
        state.fares.insert({
            "flight_id": flight["id"], "cabin": fam.cabin, "family": fam.family, "price": price,
            "taxes": money(5.6 + 0.075 * price + international_fee), "seats_left": seats,
        })


def _seed_hotels(state: TravelState, rng: random.Random, per_city: int) -> None:
    for code, (_, city, _, _, _, streets) in AIRPORTS.items():
        for n in range(per_city):
            stars = rng.choice((2, 3, 3, 4, 4, 5))
            name = f"{HOTEL_BRANDS[(n + len(city)) % len(HOTEL_BRANDS)]} {city} {rng.choice(HOTEL_SUFFIXES)}"
            hotel = state.hotels.insert({
                "name": name if n < len(HOTEL_BRANDS) else f"{name} {n // len(HOTEL_BRANDS) + 1}",
                "city": city,
                "city_code": code,
                "address": f"{rng.randint(10, 2400)} {rng.choice(streets)}, {city}",
                "stars": stars,
                "guest_rating": round(rng.uniform(6.4, 9.7), 1),
                "amenities": sorted(rng.sample(AMENITIES, k=rng.randint(2, 6))),
                "distance_to_center_km": round(rng.uniform(0.2, 12.0), 1),
                "check_in_time": CHECK_IN_TIME.strftime("%H:%M"),
                "check_out_time": CHECK_OUT_TIME.strftime("%H:%M"),
            })
            base = 60 + 45 * stars * rng.uniform(0.85, 1.2)
            for index, (room, beds, max_guests, factor) in enumerate(ROOM_TYPES[: 2 + (stars >= 3)]):
                state.rooms.insert({
                    "hotel_id": hotel["id"], "name": room, "beds": beds, "max_guests": max_guests,
                    "nightly_rate": float(round(base * factor)),
                    # The first room type never sells out, so every hotel can be booked.
                    "rooms_left": rng.randint(2, 9) if index == 0 else rng.choice((0, 1, 3, 6)),
                })


def _seed_member(state: TravelState, rng: random.Random) -> None:
    first, last = fake.person(rng)
    partner_first, _ = fake.person(rng)
    child_first, _ = fake.person(rng)
    today = state.today()
    def born(first_year: int, last_year: int) -> dt.date:
        return fake.date_between(rng, dt.date(first_year, 1, 1), dt.date(last_year, 12, 31))

    people = (  # (first, last, born, passport valid until or None): two adults and a child without a passport
        (first, last, born(1968, 1992), today.replace(year=today.year + 6)),
        (partner_first, last, born(1968, 1992), today.replace(year=today.year + 3)),
        (child_first, last, born(2013, 2019), None),
    )
    for n, (given, family, birthday, passport_expiry) in enumerate(people):
        name = f"{given} {family}"
        state.travellers.insert({
            "first_name": given, "last_name": family, "date_of_birth": birthday.isoformat(),
            "email": fake.email_for(name, rng) if n < 2 else None, "phone": fake.phone(rng) if n < 2 else None,
            "passport_number": None if passport_expiry is None else f"{rng.choice('ACEHKLMPX')}{fake.digits(rng, 8)}",
            "passport_country": None if passport_expiry is None else "US",
            "passport_expiry": None if passport_expiry is None else passport_expiry.isoformat(),
            "account_holder": n == 0,
        })
    state.loyalty_accounts.insert({
        "member_number": f"PV{fake.digits(rng, 9)}", "member_name": f"{first} {last}",
        "tier": rng.choice(("Silver", "Gold")), "points_balance": rng.randint(8, 40) * 1000,
        "member_since": fake.date_between(rng, dt.date(2012, 1, 1), dt.date(2023, 12, 31)).isoformat(),
    })


def _seed_bookings(state: TravelState, rng: random.Random) -> None:
    """An upcoming changeable trip with a hotel, an upcoming basic-economy flight, a non-refundable
    stay, a cancelled booking and a completed partner-booked flight whose points never arrived."""
    holder, partner, _ = state.travellers.all()
    today = state.today()

    def flight_on(route: int, days: int) -> Record:
        """The first flight of a priority route (outbound) ``days`` from today."""
        origin, destination = PRIORITY_ROUTES[route]
        return state.flights.first(route=f"{origin}-{destination}", date=(today + dt.timedelta(days=days)).isoformat())

    def fare(flight: Record, family: str) -> Record:
        found = state.fares.first(flight_id=flight["id"], cabin="economy", family=family)
        state.fares.update(found["id"], seats_left=max(found["seats_left"], 4))  # the seeded sale went through
        return state.fares.get(found["id"])

    created = state.now() - dt.timedelta(days=rng.randint(10, 40))
    trip = flight_on(0, 5)
    upcoming = _book_flight(state, fare(trip, "standard"), [holder, partner], created_at=created)
    seat = _free_seats(state.flights.get(trip["id"]), "economy")[0]
    _assign_seat(state, upcoming, holder["id"], seat)
    stay_hotel = state.hotels.first(city_code=trip["destination"])
    _book_hotel(state, state.rooms.first(hotel_id=stay_hotel["id"]), today + dt.timedelta(days=5),
                today + dt.timedelta(days=8), 2, holder, "flexible", created_at=created)
    basic = flight_on(1, 8)
    _book_flight(state, fare(basic, "basic"), [holder], created_at=created + dt.timedelta(days=1))
    far_hotel = state.hotels.first(city_code=basic["destination"])
    _book_hotel(state, state.rooms.first(hotel_id=far_hotel["id"]), today + dt.timedelta(days=8),
                today + dt.timedelta(days=10), 1, holder, "non_refundable", created_at=created + dt.timedelta(days=1))
    dropped = _book_flight(state, fare(flight_on(2, 3), "standard"), [partner], created_at=created)
    _cancel(state, state.bookings.get(dropped["id"]), at=created + dt.timedelta(days=2))
    home = state.flights.first(route=f"{trip['destination']}-{trip['origin']}",
                               date=(today - dt.timedelta(days=2)).isoformat())
    _book_flight(state, fare(home, "standard"), [holder], created_at=created - dt.timedelta(days=20),
                 channel="partner")


# -- shared rules -------------------------------------------------------------------------------------


def _when(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _confirmation_code(booking_id: str) -> str:
    digest = hashlib.blake2b(booking_id.encode(), digest_size=8).digest()
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    value = int.from_bytes(digest, "big")
    return "".join(alphabet[(value >> (5 * i)) % 32] for i in range(6))


def _airport(code: str) -> str:
    code = code.upper()
    lookup(AIRPORTS, code, message=f"no airport with IATA code {code}; use find_airports", reason="AIRPORT_NOT_FOUND",
           code=code)
    return code


def _family(fare: Record) -> FareFamily:
    return FAMILY[(fare["cabin"], fare["family"])]


def _rules(fam: FareFamily) -> Record:
    return {"refundable": fam.refundable, "changeable": fam.changeable, "change_fee": fam.change_fee,
            "cancel_fee": fam.cancel_fee, "seat_selection": fam.seat_selection, "checked_bags": fam.checked_bags,
            "earn_per_usd": fam.earn_per_usd}


def _seat_cabin(seat: str) -> str | None:
    row, letter = int(seat[:-1]), seat[-1]
    for cabin, (rows, letters) in CABIN_LAYOUT.items():
        if row in rows and letter in letters:
            return cabin
    return None


def _occupied(flight: Record) -> set[str]:
    """Taken seats. Stored as one space-separated string: a flight has ~100 of them and a string is
    stored and handed out without copying, which keeps seeding hundreds of flights fast."""
    return set(flight["occupied_seats"].split())


def _set_occupied(state: TravelState, flight: Record, seats: set[str]) -> None:
    ordered = sorted(seats, key=lambda seat: (int(seat[:-1]), seat[-1]))
    state.flights.update(flight["id"], occupied_seats=" ".join(ordered))


def _free_seats(flight: Record, cabin: str) -> list[str]:
    rows, letters = CABIN_LAYOUT[cabin]
    taken = _occupied(flight)
    return [f"{row}{letter}" for row in rows for letter in letters
            if f"{row}{letter}" not in taken and (cabin != "economy" or row not in EXIT_ROWS)]


def _seat_fee(seat: str) -> float:
    return EXTRA_LEGROOM_FEE if int(seat[:-1]) in EXIT_ROWS else 0.0


def _account(state: TravelState) -> Record:
    return state.loyalty_accounts.first()


def _points(state: TravelState, points: int, kind: str, booking: Record | None, description: str,
            at: dt.datetime | None = None) -> Record:
    """Move points on the member's account and record the movement (signed)."""
    account = _account(state)
    balance = account["points_balance"] + points
    state.loyalty_accounts.update(account["id"], points_balance=balance)
    return state.loyalty_activity.insert({
        "kind": kind, "points": points, "balance_after": balance, "description": description,
        "booking_id": None if booking is None else booking["id"], "created_at": iso_datetime(at or state.now()),
    })


def _started(state: TravelState, booking: Record) -> bool:
    return _when(booking["trip_start"]) <= state.now()


def _require_active(state: TravelState, booking: Record) -> None:
    require(booking["status"] != "cancelled", f"booking {booking['confirmation_code']} was cancelled on "
            f"{booking['cancelled_at']}", reason="BOOKING_ALREADY_CANCELLED")
    require(not _started(state, booking), f"the trip of booking {booking['confirmation_code']} started at "
            f"{booking['trip_start']}", reason="TRIP_ALREADY_STARTED")


def _require_flight_booking(booking: Record) -> None:
    require(booking["kind"] == "flight", f"booking {booking['confirmation_code']} is a hotel stay, not a flight",
            reason="NOT_A_FLIGHT_BOOKING", error=InvalidArgument)


def _require_departs_later(state: TravelState, flight: Record) -> None:
    require(_when(flight["departure"]) > state.now(), f"flight {flight['flight_number']} departed at "
            f"{flight['departure']}; it is now {iso_datetime(state.now())}", reason="DEPARTURE_IN_PAST")


def _require_seats(fare: Record, passengers: int) -> None:
    left = fare["seats_left"]
    message = "is sold out" if left == 0 else f"has only {left} seat(s) left"
    require(left >= passengers, f"the {fare['cabin']} {fare['family']} fare {message}; {passengers} needed: choose "
            "another fare or flight", reason="FARE_SOLD_OUT", seats_left=left, fare_id=fare["id"])


def _age_on(born: str, day: dt.date) -> int:
    birth = dt.date.fromisoformat(born)
    return day.year - birth.year - ((day.month, day.day) < (birth.month, birth.day))


def _book_flight(state: TravelState, fare: Record, travellers: list[Record], *, created_at: dt.datetime | None = None,
                 channel: str = "app") -> Record:
    """Store a flight booking, take the seats from the fare bucket and earn points (unless booked
    through a partner, whose points must be claimed)."""
    flight = state.flights.get(fare["flight_id"])
    fam = _family(fare)
    pax = len(travellers)
    base, taxes = money(fare["price"] * pax), money(fare["taxes"] * pax)
    booking_id = state.bookings.new_id()
    earned = math.floor(base * fam.earn_per_usd)
    state.fares.update(fare["id"], seats_left=fare["seats_left"] - pax)
    booking = state.bookings.insert({
        "id": booking_id,
        "kind": "flight",
        "status": "confirmed",
        "confirmation_code": _confirmation_code(booking_id),
        "channel": channel,
        "created_at": iso_datetime(created_at or state.now()),
        "trip_start": flight["departure"],
        "trip_end": flight["arrival"],
        "flight_id": flight["id"],
        "fare_id": fare["id"],
        "flight_number": flight["flight_number"],
        "origin": flight["origin"],
        "destination": flight["destination"],
        "cabin": fare["cabin"],
        "fare_family": fare["family"],
        "fare_rules": _rules(fam),
        "traveller_ids": [t["id"] for t in travellers],
        "passengers": pax,
        "seats": {},
        "price": {"base_fare": base, "taxes": taxes, "seat_fees": 0.0, "change_fees": 0.0, "fare_difference": 0.0,
                  "total": money(base + taxes)},
        "amount_paid": money(base + taxes),
        "points_redeemed": 0,
        "points_earned": earned,
        "points_credited": channel == "app",
        "changes": [],
        "cancelled_at": None,
        "refund": None,
    })
    if channel == "app":
        _points(state, earned, "earn", booking, f"Flight {flight['flight_number']} {flight['route']}", created_at)
    return booking


def _nights(check_in: dt.date, check_out: dt.date) -> list[dt.date]:
    return [check_in + dt.timedelta(days=n) for n in range((check_out - check_in).days)]


def _stay_price(room: Record, check_in: dt.date, check_out: dt.date, plan: str) -> Record:
    """Nightly rates (weekend uplift, non-refundable discount), room total, taxes and total."""
    factor = 1 - NON_REFUNDABLE_DISCOUNT if plan == "non_refundable" else 1.0
    nightly = [{"date": night.isoformat(),
                "rate": money(room["nightly_rate"] * factor * (WEEKEND_UPLIFT if night.weekday() in (4, 5) else 1))}
               for night in _nights(check_in, check_out)]
    subtotal = money(sum(n["rate"] for n in nightly))
    taxes = money(subtotal * HOTEL_TAX_RATE)
    return {"nightly": nightly, "room_total": subtotal, "taxes": taxes, "total": money(subtotal + taxes)}


def _free_cancellation_until(check_in: dt.date, plan: str) -> str | None:
    if plan != "flexible":
        return None
    arrival = dt.datetime.combine(check_in, CHECK_IN_TIME, tzinfo=dt.UTC)
    return iso_datetime(arrival - dt.timedelta(hours=FREE_CANCELLATION_HOURS))


def _stay_dates(state: TravelState, check_in: str, check_out: str) -> tuple[dt.date, dt.date]:
    start, end = parse_date(check_in, "check_in"), parse_date(check_out, "check_out")
    require(end > start, f"check_out {end} must be after check_in {start}", reason="INVALID_DATE_RANGE",
            error=InvalidArgument)
    require(start >= state.today(), f"check_in {start} is in the past; today is {state.today()}",
            reason="CHECK_IN_IN_PAST")
    nights = (end - start).days
    require(nights <= MAX_NIGHTS, f"{nights} nights; stays are limited to {MAX_NIGHTS}", reason="STAY_TOO_LONG",
            error=InvalidArgument)
    return start, end


def _book_hotel(state: TravelState, room: Record, check_in: dt.date, check_out: dt.date, guests: int,
                lead: Record, plan: str, *, created_at: dt.datetime | None = None) -> Record:
    hotel = state.hotels.get(room["hotel_id"])
    price = _stay_price(room, check_in, check_out, plan)
    booking_id = state.bookings.new_id()
    earned = math.floor(price["room_total"] * HOTEL_EARN_PER_USD)
    state.rooms.update(room["id"], rooms_left=room["rooms_left"] - 1)
    booking = state.bookings.insert({
        "id": booking_id,
        "kind": "hotel",
        "status": "confirmed",
        "confirmation_code": _confirmation_code(booking_id),
        "channel": "app",
        "created_at": iso_datetime(created_at or state.now()),
        "trip_start": iso_datetime(dt.datetime.combine(check_in, CHECK_IN_TIME, tzinfo=dt.UTC)),
        "trip_end": iso_datetime(dt.datetime.combine(check_out, CHECK_OUT_TIME, tzinfo=dt.UTC)),
        "hotel_id": hotel["id"],
        "room_id": room["id"],
        "hotel_name": hotel["name"],
        "city": hotel["city"],
        "room_name": room["name"],
        "rate_plan": plan,
        "check_in": check_in.isoformat(),
        "check_out": check_out.isoformat(),
        "nights": len(price["nightly"]),
        "guests": guests,
        "traveller_ids": [lead["id"]],
        "free_cancellation_until": _free_cancellation_until(check_in, plan),
        "price": {"nightly": price["nightly"], "room_total": price["room_total"], "taxes": price["taxes"],
                  "total": price["total"]},
        "amount_paid": price["total"],
        "points_redeemed": 0,
        "points_earned": earned,
        "points_credited": True,
        "changes": [],
        "cancelled_at": None,
        "refund": None,
    })
    _points(state, earned, "earn", booking, f"Stay at {hotel['name']}", created_at)
    return booking


def _assign_seat(state: TravelState, booking: Record, traveller_id: str, seat: str) -> Record:
    """Give a traveller a seat (releasing their old one) and charge its fee."""
    flight = state.flights.get(booking["flight_id"])
    previous = booking["seats"].get(traveller_id)
    _set_occupied(state, flight, (_occupied(flight) - {previous}) | {seat})
    fee = _seat_fee(seat)
    price = {**booking["price"], "seat_fees": money(booking["price"]["seat_fees"] + fee),
             "total": money(booking["price"]["total"] + fee)}
    return state.bookings.update(booking["id"], seats={**booking["seats"], traveller_id: seat}, price=price,
                                 amount_paid=money(booking["amount_paid"] + fee))


def _refund_terms(state: TravelState, booking: Record) -> Record:
    """What cancelling now would refund (cash and redeemed points) and what it would cost."""
    paid, points = booking["amount_paid"], booking["points_redeemed"]
    if booking["kind"] == "flight":
        rules = booking["fare_rules"]
        if rules["refundable"]:
            fee = money(rules["cancel_fee"] * booking["passengers"])
            return {"refund": money(max(0.0, paid - fee)), "cancellation_fee": fee, "points_returned": points,
                    "policy": "refundable fare: everything back less the cancellation fee"}
        return {"refund": money(min(booking["price"]["taxes"], paid)), "cancellation_fee": 0.0, "points_returned": 0,
                "policy": "non-refundable fare: only the taxes are refunded"}
    if booking["rate_plan"] == "non_refundable":
        return {"refund": 0.0, "cancellation_fee": paid, "points_returned": 0,
                "policy": "non-refundable rate: nothing is refunded"}
    if state.now() < _when(booking["free_cancellation_until"]):
        return {"refund": paid, "cancellation_fee": 0.0, "points_returned": points,
                "policy": f"free cancellation until {booking['free_cancellation_until']}"}
    first_night = money(booking["price"]["nightly"][0]["rate"] * (1 + HOTEL_TAX_RATE))
    return {"refund": money(max(0.0, paid - first_night)), "cancellation_fee": first_night, "points_returned": points,
            "policy": "late cancellation: the first night (with tax) is charged"}


def _cancel(state: TravelState, booking: Record, *, at: dt.datetime | None = None) -> Record:
    """Cancel: refund per the terms, return seats or the room to inventory, reverse earned points."""
    terms = _refund_terms(state, booking)
    if booking["kind"] == "flight":
        fare = state.fares.get(booking["fare_id"])
        state.fares.update(fare["id"], seats_left=fare["seats_left"] + booking["passengers"])
        flight = state.flights.get(booking["flight_id"])
        released = set(booking["seats"].values())
        _set_occupied(state, flight, _occupied(flight) - released)
    else:
        room = state.rooms.get(booking["room_id"])
        state.rooms.update(room["id"], rooms_left=room["rooms_left"] + 1)
    label = f"booking {booking['confirmation_code']}"
    if terms["points_returned"]:
        _points(state, terms["points_returned"], "refund", booking, f"Points returned: {label} cancelled", at)
    reversed_points = 0
    if booking["points_credited"]:
        reversed_points = min(booking["points_earned"], _account(state)["points_balance"])
        if reversed_points:
            _points(state, -reversed_points, "reversal", booking, f"Points reversed: {label} cancelled", at)
    refund = {**terms, "points_reversed": reversed_points}
    return state.bookings.update(booking["id"], status="cancelled", cancelled_at=iso_datetime(at or state.now()),
                                 refund=refund)


def _fare_view(fare: Record, passengers: int = 1) -> Record:
    fam = _family(fare)
    return {"fare_id": fare["id"], "cabin": fare["cabin"], "family": fare["family"], "price": fare["price"],
            "taxes": fare["taxes"], "total_for_passengers": money((fare["price"] + fare["taxes"]) * passengers),
            "seats_left": fare["seats_left"], "available": fare["seats_left"] >= passengers,
            "refundable": fam.refundable, "changeable": fam.changeable, "change_fee": fam.change_fee,
            "seat_selection": fam.seat_selection, "checked_bags": fam.checked_bags}


def _flight_status(state: TravelState, flight: Record) -> str:
    now = state.now()
    if _when(flight["arrival"]) <= now:
        return "landed"
    return "departed" if _when(flight["departure"]) <= now else "scheduled"


def _flight_view(state: TravelState, flight: Record) -> Record:
    return {k: v for k, v in flight.items() if k not in ("occupied_seats", "route", "date")} | {
        "status": _flight_status(state, flight),
        "origin_city": AIRPORTS[flight["origin"]][1],
        "destination_city": AIRPORTS[flight["destination"]][1],
    }


def _booking_view(state: TravelState, booking: Record) -> Record:
    now = state.now()
    if booking["status"] == "cancelled":
        trip = "cancelled"
    elif _when(booking["trip_end"]) <= now:
        trip = "completed"
    else:
        trip = "in_progress" if _when(booking["trip_start"]) <= now else "upcoming"
    travellers = [state.travellers.get(t) for t in booking["traveller_ids"]]
    return {**booking, "booking_id": booking["id"], "trip_status": trip,
            "travellers": [{"id": t["id"], "name": f"{t['first_name']} {t['last_name']}"} for t in travellers]}


def _traveller_view(state: TravelState, traveller: Record) -> Record:
    expiry = traveller["passport_expiry"]
    status = "missing" if expiry is None else ("expired" if expiry < state.today().isoformat() else "valid")
    return {**traveller, "age": _age_on(traveller["date_of_birth"], state.today()), "passport_status": status}


def _resolve_city(state: TravelState, city: str) -> str:
    wanted = city.strip().lower()
    for code, (_, name, *_rest) in AIRPORTS.items():
        if wanted in (code.lower(), name.lower()):
            return code
    raise NotFound(f"no hotels in {city!r}; cities served: {', '.join(a[1] for a in AIRPORTS.values())}",
                   reason="CITY_NOT_FOUND", city=city)


# -- examples: arguments valid on a fresh seed of any size -------------------------------------------


def _future_flight(s: TravelState, **equals: Any) -> Record:
    later = s.flights.where(lambda f: f["date"] > s.today().isoformat(), **equals)
    return later[0]


def _upcoming_booking(s: TravelState) -> Record:
    """The seeded upcoming standard-fare booking (two travellers, one seated); on a session where
    it was cancelled or changed away, a new one like it is booked first."""
    now = iso_datetime(s.now())
    found = s.bookings.first(lambda b: b["trip_start"] > now and b["passengers"] == 2, kind="flight",
                             status="confirmed", fare_family="standard")
    if found is None:
        flight = _future_flight(s, international=False)
        fare = s.fares.first(flight_id=flight["id"], cabin="economy", family="standard")
        found = _book_flight(s, fare, s.travellers.all()[:2])
    return found


def _change_example(s: TravelState) -> Record:
    booking = _upcoming_booking(s)
    current = s.flights.get(booking["flight_id"])
    for flight in s.flights.where(lambda f: f["departure"] > current["departure"], route=f"{current['origin']}-"
                                  f"{current['destination']}"):
        fare = s.fares.first(flight_id=flight["id"], cabin="economy", family="standard")
        if fare["seats_left"] >= booking["passengers"]:
            return {"booking_id": booking["id"], "new_flight_id": flight["id"]}
    raise LookupError("no later flight with standard seats on the route")


def _seat_example(s: TravelState) -> Record:
    booking = _upcoming_booking(s)
    seatless = [t for t in booking["traveller_ids"] if t not in booking["seats"]] or booking["traveller_ids"]
    seat = _free_seats(s.flights.get(booking["flight_id"]), "economy")[0]
    return {"booking_id": booking["id"], "traveller_id": seatless[0], "seat": seat}


def _booking_example(s: TravelState) -> Record:
    flight = _future_flight(s, international=False)
    fare = next(f for f in s.fares.where(flight_id=flight["id"]) if f["seats_left"] >= 2 and f["cabin"] == "economy")
    adults = s.travellers.all()[:2]
    return {"fare_id": fare["id"], "passengers": 2, "traveller_ids": [t["id"] for t in adults]}


def _hotel_example(s: TravelState, **extra: Any) -> Record:
    hotel = s.hotels.first()
    check_in = s.today() + dt.timedelta(days=3)
    return {"hotel_id": hotel["id"], "check_in": check_in.isoformat(),
            "check_out": (check_in + dt.timedelta(days=2)).isoformat(), "guests": 2, **extra}


def _hotel_booking_example(s: TravelState) -> Record:
    args = _hotel_example(s)
    room = s.rooms.first(lambda r: r["rooms_left"] > 0 and r["max_guests"] >= 2, hotel_id=args.pop("hotel_id"))
    return {"room_id": room["id"], **args, "traveller_id": s.travellers.first()["id"], "rate_plan": "flexible"}


def _claimable(s: TravelState) -> Record:
    """The completed partner booking whose points were never credited."""
    return {"booking_id": s.bookings.first(channel="partner")["id"]}


# -- how members ask, and what they choose -----------------------------------------------------------

AIRPORT_QUERIES = ("new york", "London", "Paris", "Chicago", "Toronto", "Mexico", "Seattle", "Boston", "Miami", "LAX",
                   "international", "Denver", "Austin", "san francisco")
PASSPORT_COUNTRIES = ("US", "CA", "GB", "FR", "MX", "DE", "IE", "IN", "ES", "IT", "JP", "BR")
HOTEL_SORT_ASKS = {
    "price": ("find the cheapest hotels in {city} from {check_in} to {check_out}",
              "show hotels in {city} for {check_in} to {check_out}, cheapest first",
              "search {city} hotels for {guests} guests from {check_in} to {check_out}, lowest price first"),
    "rating": ("find the best-reviewed hotels in {city} from {check_in} to {check_out}",
               "show hotels in {city} for {check_in} to {check_out}, highest guest rating first",
               "search {city} for {check_in} to {check_out} and sort by what guests rated best"),
    "stars": ("find the most upscale hotels in {city} from {check_in} to {check_out}",
              "show hotels in {city} for {check_in} to {check_out}, most stars first",
              "search {city} hotels from {check_in} to {check_out}, ordered by star rating"),
}
HOTEL_ASKS = ("find hotels in {city} from {check_in} to {check_out}",
              "search for a hotel in {city}, checking in {check_in} and out {check_out}",
              "look for a room in {city} for {guests} guests from {check_in} to {check_out}",
              "find {min_stars}-star or better hotels in {city} for {check_in} to {check_out}",
              "show hotels in {city} under ${max_nightly_price} a night from {check_in} to {check_out}")
RATE_PLAN_ASKS = {
    "non_refundable": ("book {room_id} from {check_in} to {check_out} for {guests} guests on the non-refundable rate",
                       "reserve {room_id} for {guests}, {check_in} to {check_out}, at the cheaper non-refundable rate",
                       "grab {room_id} from {check_in} to {check_out} for {guests} people; non-refundable is fine"),
    "flexible": ("book {room_id} from {check_in} to {check_out} for {guests} guests with free cancellation",
                 "reserve {room_id} for {guests} people from {check_in} to {check_out} on the flexible rate",
                 "book {room_id} for {traveller_id}, {check_in} to {check_out}, {guests} guests, refundable rate"),
    None: ("book {room_id} from {check_in} to {check_out} for {guests} guests",
           "reserve {room_id} for {guests} people, checking in {check_in} and out {check_out}",
           "book {room_id} for {traveller_id} from {check_in} to {check_out}, {guests} guests"),
}


def _trip(rng: random.Random, s: TravelState, args: Record | None = None) -> Record:
    """A flight search as a traveller makes it, drawn as a whole from the live schedule: a route
    and a day that a scheduled flight flies, for one or two people (the sources of one call draw
    the same trip)."""
    flight = rng.choice(s.flights.where(lambda f: f["date"] > s.today().isoformat()))
    return {"origin": flight["origin"], "destination": flight["destination"], "date": flight["date"],
            "passengers": rng.choice((1, 1, 2, 2, 3))}


def _party(rng: random.Random, s: TravelState, args: Record | None = None) -> Record:
    """Who flies on the call's fare, drawn as a whole: one to three of the member's travellers
    (for an international flight, those whose passport is valid that day) and their count."""
    fare = s.fares.find((args or {}).get("fare_id") or "")
    flight = fare and s.flights.find(fare["flight_id"])
    day = flight["date"] if flight and flight["international"] else None
    able = sorted(t["id"] for t in s.travellers.all()
                  if day is None or (t["passport_expiry"] is not None and t["passport_expiry"] >= day))
    chosen = sorted(rng.sample(able, min(rng.choice((1, 1, 2, 2, 3)), len(able)))) if able else []
    return {"traveller_ids": chosen, "passengers": max(len(chosen), 1)}


def _stay(rng: random.Random, s: TravelState, args: Record | None = None) -> Record:
    """A hotel stay as a traveller plans it, drawn as a whole: check-in in the next days, one to
    five nights later check-out (the sources of one call draw the same stay)."""
    check_in = s.today() + dt.timedelta(days=rng.randint(2, 10))
    nights = rng.choice((1, 2, 2, 3, 3, 4, 5))
    return {"check_in": check_in.isoformat(), "check_out": (check_in + dt.timedelta(days=nights)).isoformat()}


# -- the server and its tools --------------------------------------------------------------------------

server = Server(
    "travel_booking",
    # travellers' passport details are personal data a reply never repeats (dates of birth and
    # passport numbers already are, toolkit.answers.SENSITIVE_FIELDS)
    sensitive=("passport_expiry", "passport_country"),
    domain="travel",
    description="An online travel agency for one member: flight search with fares, fare rules and seat maps, "
    "hotel search and room rates, bookings, flight changes, cancellations with refunds, travellers and "
    "loyalty points.",
    state=TravelState,
    seed=build_travel,
    options=TravelOptions,
)


@server.tool(
    answers=("code", "city"),
    read_only=True,
    reads=["flight"],
    examples=[{"query": "new york"}, {"query": "LHR"}],
    asks=("find airports in {query}", "look up the airport code for {query}", "search airports matching {query}",
          "tell me which airports match {query} and where they fly nonstop"),
    values={"query": lambda rng, s: rng.choice(AIRPORT_QUERIES)},
)
def find_airports(
    state: TravelState,
    query: Annotated[str, Field(min_length=2, max_length=60, description="Part of a city, airport name, country "
                                                                         "code or IATA code.")],
) -> dict:
    """Find airports by city, name, country or IATA code (case-insensitive). Returns each match's
    code, name, city and country and the airports it has direct flights to; an empty list when
    nothing matches."""
    needle = query.strip().lower()
    out = []
    for code, (name, city, country, lat, lon, _) in AIRPORTS.items():
        if needle in f"{code} {name} {city} {country}".lower():
            served = sorted({f["destination"] for f in _departures_today(state, code)})
            out.append({"code": code, "name": name, "city": city, "country": country, "lat": lat, "lon": lon,
                        "nonstop_to": served})
    return {"airports": out}


def _departures_today(state: TravelState, origin: str) -> list[Record]:
    today = state.today().isoformat()
    return [f for dest in AIRPORTS for f in state.flights.where(route=f"{origin}-{dest}", date=today)]


@server.tool(
    answers=("flight_number", "departure", "arrival", "duration_min"),
    read_only=True,
    reads=["flight", "fare"],
    errors=["AIRPORT_NOT_FOUND", "SAME_ORIGIN_DESTINATION", "BAD_DATE", "DEPARTURE_IN_PAST", "SCHEDULE_NOT_PUBLISHED"],
    examples=[
        lambda s: (lambda f: {"origin": f["origin"], "destination": f["destination"], "date": f["date"]})(
            _future_flight(s)),
        lambda s: (lambda f: {"origin": f["origin"].lower(), "destination": f["destination"], "date": f["date"],
                              "cabin": "business", "passengers": 2})(_future_flight(s)),
    ],
    asks=("find flights from {origin} to {destination} on {date}", "search {origin} to {destination} flights for "
          "{date}", "show me what flies from {origin} to {destination} on {date}",
          "look for {cabin} flights from {origin} to {destination} on {date} for {passengers} people",
          "price {passengers} seats from {origin} to {destination} on {date}"),
    values={field: part_of(_trip, field) for field in ("origin", "destination", "date", "passengers")},
)
def search_flights(
    state: TravelState,
    origin: AirportCode,
    destination: AirportCode,
    date: Annotated[str, Field(pattern=ISO_DATE, description="Departure date (UTC), YYYY-MM-DD.")],
    cabin: Annotated[Cabin, Field(description="Cabin to price.")] = "economy",
    passengers: Annotated[int, Field(ge=1, le=MAX_PASSENGERS, description="How many people will fly (1-9).")] = 1,
) -> dict:
    """Nonstop flights on a date that have not departed yet, by departure time. Each flight has its
    id, number, airline, times (UTC), duration, and the fares of the cabin (fare_id, family,
    price and taxes per passenger, total for all passengers, seats left, whether bookable for
    this many passengers, refundable/changeable) with the cheapest available one. An empty list
    when the route is not flown. Fails with AIRPORT_NOT_FOUND, SAME_ORIGIN_DESTINATION, BAD_DATE,
    DEPARTURE_IN_PAST (date before today) or SCHEDULE_NOT_PUBLISHED (more than 11 days ahead)."""
    origin, destination = _airport(origin), _airport(destination)
    require(origin != destination, "origin and destination are the same airport", reason="SAME_ORIGIN_DESTINATION",
            error=InvalidArgument)
    day = parse_date(date, "date")
    require(day >= state.today(), f"{day} is in the past; today is {state.today()}", reason="DEPARTURE_IN_PAST")
    last = state.today() + dt.timedelta(days=DAYS_AHEAD)
    require(day <= last, f"flights are on sale up to {last}", reason="SCHEDULE_NOT_PUBLISHED",
            last_date=last.isoformat())
    results = []
    for flight in state.flights.where(route=f"{origin}-{destination}", date=day.isoformat()):
        if _when(flight["departure"]) <= state.now():
            continue
        fares = [_fare_view(f, passengers) for f in state.fares.where(flight_id=flight["id"]) if f["cabin"] == cabin]
        available = [f for f in fares if f["available"]]
        results.append({**_flight_view(state, flight), "fares": fares,
                        "cheapest_fare_id": min(available, key=lambda f: f["price"])["fare_id"] if available else None})
    results.sort(key=lambda f: f["departure"])
    return {"origin": origin, "destination": destination, "date": day.isoformat(), "cabin": cabin,
            "passengers": passengers, "flights": results}


@server.tool(
    answers=("departure", "arrival", "price", "seats_left"),
    read_only=True,
    reads=["flight", "fare"],
    errors=["FLIGHT_NOT_FOUND"],
    examples=[lambda s: {"flight_id": _future_flight(s)["id"]}],
    asks=("show me the details of {flight_id}", "pull up {flight_id}",
          "tell me about {flight_id}: times, fares and free seats", "check how many seats are left on {flight_id}"),
)
def get_flight(state: TravelState, flight_id: FlightId) -> dict:
    """One flight in full: number, airline, route, times (UTC), duration, distance, aircraft,
    status (scheduled, departed, landed), whether it is international (passports needed), free
    seats per cabin and every fare (fare_id, cabin, family, price, taxes, seats left, rules).
    Fails with FLIGHT_NOT_FOUND."""
    flight = state.flights.get(flight_id)
    free = {cabin: len(_free_seats(flight, cabin)) for cabin in CABIN_LAYOUT}
    return {**_flight_view(state, flight), "free_seats": free,
            "fares": [_fare_view(f) for f in state.fares.where(flight_id=flight_id)]}


@server.tool(
    answers=("refundable", "change_fee", "cancel_fee", "checked_bags"),
    read_only=True,
    reads=["fare", "flight"],
    errors=["FARE_NOT_FOUND"],
    examples=[lambda s: {"fare_id": s.fares.first(family="basic")["id"]},
              lambda s: {"fare_id": s.fares.first(family="flex", cabin="business")["id"], "passengers": 3}],
    asks=("show the rules of {fare_id}", "tell me whether {fare_id} is refundable or changeable",
          "explain the fare rules of {fare_id} for {passengers} passengers",
          "check what cancelling {fare_id} would cost for {passengers} people",
          "look up the baggage and seat rules of {fare_id}"),
)
def get_fare_rules(
    state: TravelState,
    fare_id: Annotated[str, ref("fare", "Id of a fare (far_...), from search_flights or get_flight.")],
    passengers: Annotated[int, Field(ge=1, le=MAX_PASSENGERS, description="Passengers to price it for.")] = 1,
) -> dict:
    """The rules of a fare: refundable, changeable, change fee and cancellation fee per passenger,
    seat selection, checked bags, points earned per USD, and what a change or cancellation
    would cost for this many passengers, in words and numbers. Fails with FARE_NOT_FOUND."""
    fare = state.fares.get(fare_id)
    fam = _family(fare)
    flight = state.flights.get(fare["flight_id"])
    base, taxes = money(fare["price"] * passengers), money(fare["taxes"] * passengers)
    if fam.refundable:
        back = money(base + taxes - fam.cancel_fee * passengers)
        cancel = f"Refundable: {back:.2f} back (fee {fam.cancel_fee:.2f} per passenger)."
    else:
        cancel = f"Non-refundable: only the taxes ({taxes:.2f}) are refunded."
    change = (f"Changeable to another flight on the route: {fam.change_fee:.2f} per passenger plus any fare "
              "difference (a cheaper fare refunds nothing)." if fam.changeable else "Not changeable.")
    return {"fare_id": fare_id, "flight_id": flight["id"], "flight_number": flight["flight_number"],
            "cabin": fare["cabin"], "family": fare["family"], **_rules(fam), "price": fare["price"],
            "taxes": fare["taxes"], "passengers": passengers, "total": money(base + taxes),
            "cancellation_policy": cancel, "change_policy": change,
            "seat_policy": "Seats can be chosen after booking." if fam.seat_selection
            else "Seats are assigned at check-in.",
            "points_earned": math.floor(base * fam.earn_per_usd)}


@server.tool(
    answers=("available_seats",),
    read_only=True,
    reads=["flight"],
    errors=["FLIGHT_NOT_FOUND"],
    examples=[lambda s: {"flight_id": _future_flight(s)["id"]},
              lambda s: {"flight_id": _future_flight(s)["id"], "cabin": "business"}],
    asks=("show the seat map of {flight_id}", "show me which seats are free on {flight_id}",
          "pull up the {cabin} seat map for {flight_id}", "list the open {cabin} seats on {flight_id}"),
)
def get_seat_map(
    state: TravelState,
    flight_id: FlightId,
    cabin: Annotated[Cabin, Field(description="Which cabin's seats to show.")] = "economy",
) -> dict:
    """The seat map of one cabin: rows of seats, each with its code (e.g. 14C), window/middle/
    aisle, whether it is free, extra legroom and its fee (exit rows 16-17 cost 35.00). Fails
    with FLIGHT_NOT_FOUND."""
    flight = state.flights.get(flight_id)
    rows, letters = CABIN_LAYOUT[cabin]
    taken = _occupied(flight)
    out = []
    for row in rows:
        legroom = cabin == "economy" and row in EXIT_ROWS
        out.append({"row": row, "seats": [{"seat": f"{row}{letter}", "type": SEAT_TYPE[letter],
                                           "available": f"{row}{letter}" not in taken, "extra_legroom": legroom,
                                           "fee": EXTRA_LEGROOM_FEE if legroom else 0.0} for letter in letters]})
    free = sum(seat["available"] for row in out for seat in row["seats"])
    return {"flight_id": flight_id, "flight_number": flight["flight_number"], "cabin": cabin, "layout": letters,
            "available_seats": free, "rows": out}


@server.tool(
    idempotent=True,  # the same seat for the same traveller again changes nothing
    reads=["booking", "flight", "traveller"],
    mutates=["booking", "flight"],
    errors=["BOOKING_NOT_FOUND", "NOT_A_FLIGHT_BOOKING", "BOOKING_ALREADY_CANCELLED", "TRIP_ALREADY_STARTED",
            "SEAT_SELECTION_NOT_ALLOWED", "TRAVELLER_NOT_ON_BOOKING", "SEAT_NOT_FOUND", "SEAT_NOT_IN_CABIN",
            "SEAT_TAKEN"],
    examples=[_seat_example],
    asks=("pick seat {seat} for {traveller_id} on {booking_id}", "put {traveller_id} in {seat} on {booking_id}",
          "move {traveller_id} to seat {seat}", "reserve seat {seat} on {booking_id}"),
)
def select_seat(
    state: TravelState,
    booking_id: BookingId,
    traveller_id: Annotated[str, ref("traveller", "Id of a traveller on the booking (trv_...).")],
    seat: Annotated[str, Field(pattern=r"^\d{1,2}[A-Fa-f]$", description="Seat code from get_seat_map, e.g. 14C.")],
) -> dict:
    """Choose a seat for one traveller on a flight booking; a seat chosen before is released.
    Exit-row seats (extra legroom) add 35.00 to the booking. Returns the booking's seats, the fee
    charged and the amount paid. Fails with SEAT_TAKEN (pick another from get_seat_map),
    SEAT_NOT_IN_CABIN (a seat of another cabin), SEAT_NOT_FOUND, SEAT_SELECTION_NOT_ALLOWED (basic
    economy: seats are assigned at check-in), TRAVELLER_NOT_ON_BOOKING, NOT_A_FLIGHT_BOOKING,
    BOOKING_ALREADY_CANCELLED or TRIP_ALREADY_STARTED."""
    booking = state.bookings.get(booking_id)
    _require_flight_booking(booking)
    _require_active(state, booking)
    require(booking["fare_rules"]["seat_selection"], f"the {booking['cabin']} {booking['fare_family']} fare has no "
            "seat selection: seats are assigned at check-in", reason="SEAT_SELECTION_NOT_ALLOWED")
    require(traveller_id in booking["traveller_ids"], f"traveller {traveller_id} is not on booking "
            f"{booking['confirmation_code']}", reason="TRAVELLER_NOT_ON_BOOKING", error=InvalidArgument,
            traveller_ids=booking["traveller_ids"])
    seat = seat.upper()
    cabin = require_found(_seat_cabin(seat), f"there is no seat {seat} on this aircraft", reason="SEAT_NOT_FOUND",
                          seat=seat)
    require(cabin == booking["cabin"], f"{seat} is in {cabin}; this booking flies {booking['cabin']}",
            reason="SEAT_NOT_IN_CABIN", error=InvalidArgument)
    if booking["seats"].get(traveller_id) == seat:
        return {"booking_id": booking_id, "seats": booking["seats"], "fee": 0.0, "amount_paid": booking["amount_paid"]}
    flight = state.flights.get(booking["flight_id"])
    if seat in _occupied(flight):
        raise Conflict(f"seat {seat} is taken; choose another from get_seat_map", reason="SEAT_TAKEN", seat=seat)
    updated = _assign_seat(state, booking, traveller_id, seat)
    return {"booking_id": booking_id, "seats": updated["seats"], "fee": _seat_fee(seat),
            "amount_paid": updated["amount_paid"]}


@server.tool(
    answers=("stars", "guest_rating", "average_nightly_rate", "total"),
    read_only=True,
    reads=["hotel", "room"],
    errors=["CITY_NOT_FOUND", "BAD_DATE", "INVALID_DATE_RANGE", "CHECK_IN_IN_PAST", "STAY_TOO_LONG"],
    examples=[lambda s: {**{k: v for k, v in _hotel_example(s).items() if k != "hotel_id"}, "city": "Los Angeles"},
              lambda s: {**{k: v for k, v in _hotel_example(s).items() if k != "hotel_id"}, "city": "lhr",
                         "min_stars": 3, "sort": "price"}],
    asks=lambda a: HOTEL_SORT_ASKS.get(a.get("sort"), HOTEL_ASKS),
    values={"city": lambda rng, s: rng.choice([a[1] for a in AIRPORTS.values()] + list(AIRPORTS)[:4]),
            "check_in": part_of(_stay, "check_in"), "check_out": part_of(_stay, "check_out")},
)
def search_hotels(
    state: TravelState,
    city: Annotated[str, Field(min_length=2, max_length=60, description="City name or its airport code, e.g. "
                                                                        "'Seattle' or 'SEA'.")],
    check_in: CheckIn,
    check_out: CheckOut,
    guests: Guests = 2,
    min_stars: Annotated[int | None, Field(ge=1, le=5, description="Only hotels with this many stars or more.")] = None,
    max_nightly_price: Annotated[float | None, Field(
        gt=0, description="Only hotels whose cheapest suitable room averages at most this per night (USD).")] = None,
    sort: Annotated[Literal["recommended", "price", "rating", "stars"],
                    Field(description="Result order.")] = "recommended",
) -> dict:
    """Hotels in a city with a room for the guests on those dates: id, name, stars, guest rating,
    address, distance to the centre, amenities, and the cheapest suitable room (room_id, average
    nightly rate and total for the stay on the flexible rate). Sold-out hotels are left out and
    counted. Fails with CITY_NOT_FOUND, INVALID_DATE_RANGE (check-out not after check-in),
    CHECK_IN_IN_PAST, STAY_TOO_LONG (over 30 nights) or BAD_DATE."""
    code = _resolve_city(state, city)
    start, end = _stay_dates(state, check_in, check_out)
    results, sold_out = [], 0
    for hotel in state.hotels.where(city_code=code):
        if min_stars is not None and hotel["stars"] < min_stars:
            continue
        rooms = [r for r in state.rooms.where(hotel_id=hotel["id"]) if r["max_guests"] >= guests and r["rooms_left"]]
        if not rooms:
            sold_out += 1
            continue
        room = min(rooms, key=lambda r: r["nightly_rate"])
        price = _stay_price(room, start, end, "flexible")
        average = money(price["room_total"] / len(price["nightly"]))
        if max_nightly_price is not None and average > max_nightly_price:
            continue
        results.append({**hotel, "hotel_id": hotel["id"], "cheapest_room": {
            "room_id": room["id"], "name": room["name"], "average_nightly_rate": average, "total": price["total"]}})
    orders = {"recommended": lambda h: (-h["guest_rating"] * h["stars"], h["cheapest_room"]["total"]),
              "price": lambda h: h["cheapest_room"]["total"], "rating": lambda h: -h["guest_rating"],
              "stars": lambda h: (-h["stars"], h["cheapest_room"]["total"])}
    results.sort(key=orders[sort])
    return {"city": AIRPORTS[code][1], "check_in": start.isoformat(), "check_out": end.isoformat(),
            "nights": (end - start).days, "guests": guests, "hotels": results, "sold_out_hotels": sold_out}


@server.tool(
    answers=("stars", "guest_rating", "nightly_rate", "rooms_left"),
    read_only=True,
    reads=["hotel", "room"],
    errors=["HOTEL_NOT_FOUND"],
    examples=[lambda s: {"hotel_id": s.hotels.first()["id"]}],
    asks=("show me {hotel_id}", "tell me about {hotel_id}: rooms, amenities and check-in time", "look up {hotel_id}",
          "list the room types at {hotel_id}"),
)
def get_hotel(state: TravelState, hotel_id: HotelId) -> dict:
    """One hotel in full: name, stars, guest rating, address, amenities, check-in and check-out
    times, and its room types (room_id, beds, max guests, base nightly rate, rooms left). For
    prices on dates use get_room_rates. Fails with HOTEL_NOT_FOUND."""
    hotel = state.hotels.get(hotel_id)
    return {**hotel, "rooms": state.rooms.where(hotel_id=hotel_id)}


@server.tool(
    answers=("available", "rooms_left"),
    read_only=True,
    reads=["hotel", "room"],
    errors=["HOTEL_NOT_FOUND", "BAD_DATE", "INVALID_DATE_RANGE", "CHECK_IN_IN_PAST", "STAY_TOO_LONG"],
    examples=[_hotel_example, lambda s: _hotel_example(s, guests=4)],
    asks=("get room rates at {hotel_id} from {check_in} to {check_out}",
          "price a stay at {hotel_id} from {check_in} to {check_out}",
          "check prices at {hotel_id} for {guests} guests, {check_in} to {check_out}",
          "compare the flexible and non-refundable rates at {hotel_id} for {check_in} to {check_out}"),
    values={"check_in": part_of(_stay, "check_in"), "check_out": part_of(_stay, "check_out")},
)
def get_room_rates(
    state: TravelState,
    hotel_id: HotelId,
    check_in: CheckIn,
    check_out: CheckOut,
    guests: Guests = 2,
) -> dict:
    """Prices of every room type for the dates, on both rate plans: flexible (free cancellation
    until 48 h before check-in at 15:00 UTC) and non_refundable (12% cheaper). Each rate has
    nightly prices (Friday and Saturday nights cost 15% more), room total, 14% taxes, total,
    whether the room fits the guests and is available. Fails with HOTEL_NOT_FOUND,
    INVALID_DATE_RANGE, CHECK_IN_IN_PAST, STAY_TOO_LONG or BAD_DATE."""
    hotel = state.hotels.get(hotel_id)
    start, end = _stay_dates(state, check_in, check_out)
    rooms = []
    for room in state.rooms.where(hotel_id=hotel_id):
        rates = [{"rate_plan": plan, **_stay_price(room, start, end, plan),
                  "free_cancellation_until": _free_cancellation_until(start, plan)}
                 for plan in ("flexible", "non_refundable")]
        rooms.append({"room_id": room["id"], "name": room["name"], "beds": room["beds"],
                      "max_guests": room["max_guests"], "fits_guests": room["max_guests"] >= guests,
                      "available": room["rooms_left"] > 0, "rooms_left": room["rooms_left"], "rates": rates})
    return {"hotel_id": hotel_id, "hotel_name": hotel["name"], "check_in": start.isoformat(),
            "check_out": end.isoformat(), "nights": (end - start).days, "guests": guests, "rooms": rooms}


@server.tool(
    reads=["fare", "flight", "traveller"],
    produces=["booking", "loyalty_activity"],
    mutates=["fare", "loyalty_account"],
    errors=["FARE_NOT_FOUND", "TRAVELLER_NOT_FOUND", "PASSENGER_COUNT_MISMATCH", "DUPLICATE_TRAVELLER",
            "DEPARTURE_IN_PAST", "FARE_SOLD_OUT", "PASSPORT_REQUIRED"],
    examples=[_booking_example],
    asks=("book {fare_id} for {passengers} passengers: {traveller_ids}",
          "buy {fare_id} for {passengers} travellers ({traveller_ids})",
          "reserve {passengers} seats on {fare_id} for travellers {traveller_ids}",
          "go ahead and book {fare_id} for {traveller_ids}, {passengers} people in total"),
    values={"passengers": part_of(_party, "passengers"), "traveller_ids": part_of(_party, "traveller_ids")},
)
def book_flight(
    state: TravelState,
    fare_id: Annotated[str, ref("fare", "Id of the fare to buy (far_...), from search_flights or get_flight.")],
    passengers: Annotated[int, Field(ge=1, le=MAX_PASSENGERS, description="How many passengers the fare was "
                                                                          "searched for; must equal the travellers.")],
    traveller_ids: Annotated[list[str], Field(
        min_length=1, max_length=MAX_PASSENGERS, description="Ids of the travellers flying (trv_...), from "
                                                             "list_travellers.")],
) -> dict:
    """Book a fare for the travellers and pay for it with the card on file. Returns the booking
    (booking_id, confirmation code, flight, fare rules, price with taxes, amount paid, points
    earned). Fails with PASSENGER_COUNT_MISMATCH (passengers differs from the number of
    travellers), DUPLICATE_TRAVELLER, FARE_SOLD_OUT (fewer seats left in the fare than
    travellers: try another fare), DEPARTURE_IN_PAST, PASSPORT_REQUIRED (an international flight
    and a traveller without a passport valid on the day: add it with add_traveller) or
    TRAVELLER_NOT_FOUND."""
    fare = state.fares.get(fare_id)
    require(passengers == len(traveller_ids), f"{passengers} passenger(s) searched but {len(traveller_ids)} "
            "traveller(s) named: they must match", reason="PASSENGER_COUNT_MISMATCH", error=InvalidArgument,
            passengers=passengers, travellers=len(traveller_ids))
    require(len(set(traveller_ids)) == len(traveller_ids), "a traveller is named twice", reason="DUPLICATE_TRAVELLER",
            error=InvalidArgument)
    travellers = [state.travellers.get(t) for t in traveller_ids]
    flight = state.flights.get(fare["flight_id"])
    _require_departs_later(state, flight)
    _require_seats(fare, passengers)
    if flight["international"]:
        day = flight["date"]
        for t in travellers:
            require(t["passport_expiry"] is not None and t["passport_expiry"] >= day,
                    f"{t['first_name']} {t['last_name']} needs a passport valid on {day} for this international "
                    "flight", reason="PASSPORT_REQUIRED", traveller_id=t["id"])
    return _booking_view(state, _book_flight(state, fare, travellers))


@server.tool(
    reads=["room", "hotel", "traveller"],
    produces=["booking", "loyalty_activity"],
    mutates=["room", "loyalty_account"],
    errors=["ROOM_NOT_FOUND", "TRAVELLER_NOT_FOUND", "BAD_DATE", "INVALID_DATE_RANGE", "CHECK_IN_IN_PAST",
            "STAY_TOO_LONG", "TOO_MANY_GUESTS", "ROOM_SOLD_OUT"],
    examples=[_hotel_booking_example],
    asks=lambda a: RATE_PLAN_ASKS[a.get("rate_plan")],
    values={"check_in": part_of(_stay, "check_in"), "check_out": part_of(_stay, "check_out")},
)
def book_hotel(
    state: TravelState,
    room_id: Annotated[str, ref("room", "Id of the room type (rm_...), from get_room_rates or search_hotels.")],
    check_in: CheckIn,
    check_out: CheckOut,
    guests: Guests,
    traveller_id: Annotated[str, ref("traveller", "Id of the lead guest (trv_...), from list_travellers.")],
    rate_plan: Annotated[RatePlan, Field(description="flexible (free cancellation until 48 h before) or "
                                                     "non_refundable (12% cheaper, no refund).")] = "flexible",
) -> dict:
    """Book one room for the dates and pay with the card on file. Returns the booking (booking_id,
    confirmation code, nightly prices, taxes, total, free cancellation deadline, points earned).
    Fails with INVALID_DATE_RANGE (check-out not after check-in), CHECK_IN_IN_PAST, STAY_TOO_LONG,
    TOO_MANY_GUESTS (more than the room sleeps: pick a bigger room), ROOM_SOLD_OUT,
    ROOM_NOT_FOUND, TRAVELLER_NOT_FOUND or BAD_DATE (not a real date)."""
    room = state.rooms.get(room_id)
    lead = state.travellers.get(traveller_id)
    start, end = _stay_dates(state, check_in, check_out)
    require(guests <= room["max_guests"], f"the {room['name']} sleeps {room['max_guests']}; {guests} guests",
            reason="TOO_MANY_GUESTS", error=InvalidArgument, max_guests=room["max_guests"])
    require(room["rooms_left"] > 0, f"the {room['name']} is sold out for these dates; choose another room or hotel",
            reason="ROOM_SOLD_OUT")
    return _booking_view(state, _book_hotel(state, room, start, end, guests, lead, rate_plan))


@server.tool(
    answers=("status", "confirmation_code", "total"),
    read_only=True,
    reads=["booking", "traveller", "loyalty_activity"],
    errors=["BOOKING_NOT_FOUND"],
    examples=[lambda s: {"booking_id": s.bookings.first()["id"]}],
    asks=("show me {booking_id}", "pull up the details of {booking_id}",
          "tell me what I'd get back if I cancelled {booking_id}", "check the status of {booking_id}"),
)
def get_booking(state: TravelState, booking_id: BookingId) -> dict:
    """One booking in full: kind (flight or hotel), status, confirmation code, trip status
    (upcoming, in_progress, completed, cancelled), what was booked, travellers, seats, fare rules
    or rate plan, price breakdown, amount paid, points earned or redeemed, change history, the
    refund if cancelled, what cancelling now would refund, and its loyalty activity. Fails with
    BOOKING_NOT_FOUND."""
    booking = state.bookings.get(booking_id)
    view = _booking_view(state, booking)
    if booking["status"] == "confirmed" and not _started(state, booking):
        view["cancellation_quote"] = _refund_terms(state, booking)
    return {**view, "loyalty_activity": state.loyalty_activity.where(booking_id=booking_id)}


@server.tool(
    answers=("kind", "status", "trip_start", "total"),
    read_only=True,
    reads=["booking", "traveller"],
    examples=[{}, {"kind": "flight", "status": "confirmed", "when": "upcoming"}],
    asks=("show all my bookings", "list my {kind} bookings", "show my {when} trips", "list my {status} bookings",
          "show my {when} {kind} bookings that are {status}", "show the next {limit} bookings after the first "
          "{offset}"),
)
def list_bookings(
    state: TravelState,
    kind: Annotated[Literal["flight", "hotel"] | None, Field(description="Only flight or only hotel bookings.")] = None,
    status: Annotated[Literal["confirmed", "cancelled"] | None, Field(description="Only this status.")] = None,
    when: Annotated[Literal["upcoming", "past"] | None, Field(description="Only trips that have not started yet, "
                                                                          "or only those that have.")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="Page size.")] = 20,
    offset: Annotated[int, Field(ge=0, description="Bookings to skip; pass the previous next_offset.")] = 0,
) -> dict:
    """The member's bookings by trip start (soonest first): booking_id, kind, status, confirmation
    code, trip status, what was booked, dates and amount paid. Returns a page, total and
    next_offset."""
    filters = {k: v for k, v in (("kind", kind), ("status", status)) if v}
    found = [_booking_view(state, b) for b in state.bookings.where(**filters)
             if when is None or (when == "upcoming") != _started(state, b)]
    found.sort(key=lambda b: b["trip_start"])
    return paginate(found, limit=limit, offset=offset, key="bookings")


@server.tool(
    idempotent=True,  # a repeat finds the booking already on that flight (ALREADY_ON_FLIGHT)
    reads=["booking", "flight", "fare"],
    mutates=["booking", "fare", "flight"],
    errors=["BOOKING_NOT_FOUND", "FLIGHT_NOT_FOUND", "NOT_A_FLIGHT_BOOKING", "BOOKING_ALREADY_CANCELLED",
            "TRIP_ALREADY_STARTED", "NON_CHANGEABLE_FARE", "ALREADY_ON_FLIGHT", "DIFFERENT_ROUTE", "DEPARTURE_IN_PAST",
            "FARE_SOLD_OUT"],
    examples=[_change_example],
    asks=("move {booking_id} to {new_flight_id}", "change {booking_id} over to {new_flight_id}",
          "switch {booking_id} to {new_flight_id} instead", "rebook {booking_id} on {new_flight_id}"),
)
def change_flight(
    state: TravelState,
    booking_id: BookingId,
    new_flight_id: Annotated[str, ref("flight", "Id of the flight to move to (flt_...): same route, from "
                                                "search_flights.")],
) -> dict:
    """Move a flight booking to another flight on the same route (another date or time), keeping
    the cabin and fare family. Charges the change fee per passenger plus the fare difference when
    the new fare is dearer (a cheaper fare refunds nothing); chosen seats are released. Returns
    the booking and the charges. Fails with NON_CHANGEABLE_FARE (basic economy: cancel instead),
    DIFFERENT_ROUTE, ALREADY_ON_FLIGHT, DEPARTURE_IN_PAST, FARE_SOLD_OUT (no seats in that fare on
    the new flight), BOOKING_ALREADY_CANCELLED, TRIP_ALREADY_STARTED or NOT_A_FLIGHT_BOOKING."""
    booking = state.bookings.get(booking_id)
    _require_flight_booking(booking)
    _require_active(state, booking)
    require(booking["fare_rules"]["changeable"], f"the {booking['cabin']} {booking['fare_family']} fare cannot be "
            "changed; cancel it instead (only taxes are refunded)", reason="NON_CHANGEABLE_FARE")
    new_flight = state.flights.get(new_flight_id)
    require(new_flight_id != booking["flight_id"], f"booking {booking['confirmation_code']} is already on flight "
            f"{new_flight['flight_number']} at {new_flight['departure']}", reason="ALREADY_ON_FLIGHT")
    require((new_flight["origin"], new_flight["destination"]) == (booking["origin"], booking["destination"]),
            f"flight {new_flight['flight_number']} flies {new_flight['route']}; the booking is "
            f"{booking['origin']}-{booking['destination']}", reason="DIFFERENT_ROUTE", error=InvalidArgument)
    _require_departs_later(state, new_flight)
    new_fare = state.fares.first(flight_id=new_flight_id, cabin=booking["cabin"], family=booking["fare_family"])
    pax = booking["passengers"]
    _require_seats(new_fare, pax)
    old_fare = state.fares.get(booking["fare_id"])
    difference = money(max(0.0, new_fare["price"] - old_fare["price"]) * pax)
    fee = money(booking["fare_rules"]["change_fee"] * pax)
    state.fares.update(old_fare["id"], seats_left=old_fare["seats_left"] + pax)
    state.fares.update(new_fare["id"], seats_left=new_fare["seats_left"] - pax)
    old_flight = state.flights.get(booking["flight_id"])
    released = set(booking["seats"].values())
    _set_occupied(state, old_flight, _occupied(old_flight) - released)
    price = booking["price"]
    price = {**price, "change_fees": money(price["change_fees"] + fee),
             "fare_difference": money(price["fare_difference"] + difference),
             "total": money(price["total"] + fee + difference)}
    change = {"at": iso_datetime(state.now()), "from_flight": old_flight["flight_number"],
              "from_departure": old_flight["departure"], "to_flight": new_flight["flight_number"],
              "to_departure": new_flight["departure"], "change_fee": fee, "fare_difference": difference}
    updated = state.bookings.update(
        booking_id, flight_id=new_flight_id, fare_id=new_fare["id"], flight_number=new_flight["flight_number"],
        trip_start=new_flight["departure"], trip_end=new_flight["arrival"], seats={}, price=price,
        amount_paid=money(booking["amount_paid"] + fee + difference), changes=[*booking["changes"], change])
    return {"booking": _booking_view(state, updated), "change_fee": fee, "fare_difference": difference,
            "charged": money(fee + difference)}


@server.tool(
    destructive=True,
    idempotent=True,  # a repeat is refused with BOOKING_ALREADY_CANCELLED
    reads=["booking"],
    mutates=["booking", "fare", "flight", "room", "loyalty_account"],
    produces=["loyalty_activity"],
    errors=["BOOKING_NOT_FOUND", "BOOKING_ALREADY_CANCELLED", "TRIP_ALREADY_STARTED"],
    examples=[lambda s: {"booking_id": _upcoming_booking(s)["id"]},
              lambda s: {"booking_id": s.bookings.first(kind="hotel", rate_plan="non_refundable")["id"]}],
    asks=("cancel {booking_id}", "call off {booking_id} and refund what you can", "go ahead and cancel {booking_id}",
          "drop {booking_id}, we're not going"),
)
def cancel_booking(state: TravelState, booking_id: BookingId) -> dict:
    """Cancel a flight or hotel booking before the trip starts. Refunds to the card per the rules:
    refundable fares everything less the cancellation fee; non-refundable fares only the taxes;
    flexible hotel rates everything until 48 h before check-in, then all but the first night;
    non-refundable rates nothing. Redeemed points come back where money does; earned points are
    reversed. Returns the cancelled booking and its refund. Fails with BOOKING_ALREADY_CANCELLED
    or TRIP_ALREADY_STARTED."""
    booking = state.bookings.get(booking_id)
    _require_active(state, booking)
    cancelled = _cancel(state, booking)
    return {"booking": _booking_view(state, cancelled), "refund": cancelled["refund"]}


@server.tool(
    idempotent=True,  # the same person twice is refused with TRAVELLER_ALREADY_EXISTS
    reads=["traveller"],
    produces=["traveller"],
    errors=["BAD_DATE", "DATE_OF_BIRTH_IN_FUTURE", "PASSPORT_DETAILS_INCOMPLETE", "PASSPORT_EXPIRED",
            "TRAVELLER_ALREADY_EXISTS", "TRAVELLER_LIMIT_REACHED"],
    examples=[{"first_name": "Ingrid", "last_name": "Olsen", "date_of_birth": "1988-04-17",
               "passport_number": "K48213977", "passport_country": "NO", "passport_expiry": "2031-09-30",
               "email": "ingrid.olsen@example.com"}],
    asks=("add {first_name} {last_name}, born {date_of_birth}, as a traveller",
          "save a traveller: {first_name} {last_name}, date of birth {date_of_birth}",
          "add {first_name} {last_name} (born {date_of_birth}) with passport {passport_number} from "
          "{passport_country}, expiring {passport_expiry}",
          "put {first_name} {last_name}, born {date_of_birth}, on my profile with the e-mail {email}",
          "add traveller {first_name} {last_name}, born {date_of_birth}, passport {passport_number} issued by "
          "{passport_country} valid until {passport_expiry}, e-mail {email}"),
    values={"first_name": lambda rng, s: rng.choice(fake.FIRST_NAMES),
            "last_name": lambda rng, s: rng.choice(fake.LAST_NAMES),
            "date_of_birth": lambda rng, s: fake.date_between(rng, dt.date(1950, 1, 1), dt.date(2012, 12, 31))
            .isoformat(),
            "passport_number": lambda rng, s: rng.choice("ABCKLMNPX") + fake.digits(rng, 8),
            "passport_country": lambda rng, s: rng.choice(PASSPORT_COUNTRIES),
            "passport_expiry": lambda rng, s: fake.date_between(rng, s.today() + dt.timedelta(days=200),
                                                                s.today() + dt.timedelta(days=3600)).isoformat(),
            "email": lambda rng, s: fake.email_for(fake.full_name(rng), rng)},
)
def add_traveller(
    state: TravelState,
    first_name: Annotated[str, Field(min_length=1, max_length=40, description="Given name as in the passport.")],
    last_name: Annotated[str, Field(min_length=1, max_length=40, description="Family name as in the passport.")],
    date_of_birth: Annotated[str, Field(pattern=ISO_DATE, description="Date of birth, YYYY-MM-DD.")],
    passport_number: Annotated[str | None, Field(
        pattern=r"^[A-Z0-9]{6,12}$", description="Passport number (capital letters and digits).")] = None,
    passport_country: Annotated[str | None, Field(pattern=r"^[A-Z]{2}$", description="Issuing country, ISO code "
                                                                                     "such as US.")] = None,
    passport_expiry: Annotated[str | None, Field(pattern=ISO_DATE, description="Passport expiry, YYYY-MM-DD.")] = None,
    # The addresses ^[^@\s]+@[^@\s]+\.[^@\s]+$ accepts, matched in linear time (that form backtracks with the
    # square of the length): the domain is split at its first dot after the first character.
    email: Annotated[str | None, Field(pattern=r"^[^@\s]+@[^@\s][^@\s.]*\.[^@\s]+$",
                                       description="E-mail address.")] = None,
) -> dict:
    """Save a traveller on the member's profile so they can be booked. A passport needs number,
    country and expiry together. Returns the traveller (traveller_id). Fails with
    TRAVELLER_ALREADY_EXISTS (same name and birth date), PASSPORT_DETAILS_INCOMPLETE,
    PASSPORT_EXPIRED, DATE_OF_BIRTH_IN_FUTURE, BAD_DATE or TRAVELLER_LIMIT_REACHED (9 travellers)."""
    born = parse_date(date_of_birth, "date_of_birth")
    require(born <= state.today(), f"date_of_birth {born} is in the future", reason="DATE_OF_BIRTH_IN_FUTURE",
            error=InvalidArgument)
    passport = (passport_number, passport_country, passport_expiry)
    require(all(passport) or not any(passport), "a passport needs passport_number, passport_country and "
            "passport_expiry together", reason="PASSPORT_DETAILS_INCOMPLETE", error=InvalidArgument)
    if passport_expiry is not None:
        expiry = parse_date(passport_expiry, "passport_expiry")
        require(expiry >= state.today(), f"the passport expired on {expiry}", reason="PASSPORT_EXPIRED",
                error=InvalidArgument)
    same = state.travellers.first(lambda t: (t["first_name"].lower(), t["last_name"].lower()) ==
                                  (first_name.lower(), last_name.lower()), date_of_birth=born.isoformat())
    if same is not None:
        raise Conflict(f"{first_name} {last_name} is already saved as {same['id']}", reason="TRAVELLER_ALREADY_EXISTS",
                       traveller_id=same["id"])
    require(len(state.travellers) < MAX_TRAVELLERS, f"a profile holds at most {MAX_TRAVELLERS} travellers",
            reason="TRAVELLER_LIMIT_REACHED", error=ResourceExhausted, limit=MAX_TRAVELLERS)
    traveller = state.travellers.insert({
        "first_name": first_name, "last_name": last_name, "date_of_birth": born.isoformat(), "email": email,
        "phone": None, "passport_number": passport_number, "passport_country": passport_country,
        "passport_expiry": passport_expiry, "account_holder": False,
    })
    return {"traveller_id": traveller["id"], **_traveller_view(state, traveller)}


@server.tool(
    answers=("age", "passport_status"),
    read_only=True,
    reads=["traveller"],
    examples=[{}],
    asks=("list my travellers", "show the travellers saved on my profile",
          "show me whose passports are on file and when they expire", "show everyone I can book trips for"),
)
def list_travellers(state: TravelState) -> dict:
    """The travellers on the member's profile: traveller id, names, date of birth and age, contact
    details, passport number, country and expiry, and passport_status (valid, expired, missing)."""
    return {"travellers": [_traveller_view(state, t) for t in state.travellers]}


@server.tool(
    answers=("tier", "points_balance", "points_value_usd"),
    read_only=True,
    reads=["loyalty_account", "loyalty_activity"],
    examples=[{}],
    asks=("show my loyalty points", "tell me how many points I have", "check my loyalty tier and recent points "
          "activity", "show what my points are worth"),
)
def get_loyalty_account(state: TravelState) -> dict:
    """The member's loyalty account: member number, tier, points balance and its cash value (1
    point = 0.01 USD), the redemption rules, and the 10 latest point movements (earn, redeem,
    refund, reversal, claim) with the booking each belongs to."""
    account = _account(state)
    recent = sorted(state.loyalty_activity.all(), key=lambda a: a["created_at"], reverse=True)[:10]
    return {**account, "points_value_usd": money(account["points_balance"] * POINT_VALUE),
            "redemption": {"minimum_points": MIN_REDEMPTION, "multiple_of": 100, "usd_per_point": POINT_VALUE,
                           "covers": "fares and room charges, not taxes"},
            "recent_activity": recent}


@server.tool(
    reads=["booking", "loyalty_account"],
    produces=["loyalty_activity"],
    mutates=["booking", "loyalty_account"],
    errors=["BOOKING_NOT_FOUND", "BOOKING_ALREADY_CANCELLED", "TRIP_ALREADY_STARTED", "INSUFFICIENT_POINTS",
            "REDEMPTION_EXCEEDS_FARE"],
    examples=[lambda s: {"booking_id": _upcoming_booking(s)["id"], "points": 2000}],
    asks=("use {points} points on {booking_id}", "redeem {points} points against {booking_id}",
          "pay for part of {booking_id} with {points} points", "knock {points} points off {booking_id}"),
    values={"points": lambda rng, s: rng.choice((1000, 1500, 2000, 2500, 3000, 5000))},
)
def redeem_points(
    state: TravelState,
    booking_id: BookingId,
    points: Annotated[int, Field(ge=MIN_REDEMPTION, le=1_000_000, multiple_of=100,
                                 description="Points to redeem: at least 1000, in hundreds; 100 points = 1.00 USD.")],
) -> dict:
    """Pay part of an upcoming booking with points: their value (1 cent each) is refunded to the
    card. Points cover the fare or room charges, never the taxes. Returns the booking's new
    amount paid, the credit and the points balance. Fails with INSUFFICIENT_POINTS,
    REDEMPTION_EXCEEDS_FARE (more than is left to pay above the taxes), BOOKING_ALREADY_CANCELLED
    or TRIP_ALREADY_STARTED."""
    booking = state.bookings.get(booking_id)
    _require_active(state, booking)
    balance = _account(state)["points_balance"]
    require(points <= balance, f"{points} points requested; the balance is {balance}", reason="INSUFFICIENT_POINTS",
            balance=balance)
    credit = money(points * POINT_VALUE)
    room = money(booking["amount_paid"] - booking["price"]["taxes"])
    require(credit <= room, f"{points} points are worth {credit:.2f}, but only {max(room, 0):.2f} of this booking "
            f"can be paid with points (taxes are excluded)", reason="REDEMPTION_EXCEEDS_FARE", error=InvalidArgument,
            max_points=max(0, math.floor(room / POINT_VALUE / 100) * 100))
    activity = _points(state, -points, "redeem", booking, f"Redeemed on booking {booking['confirmation_code']}")
    updated = state.bookings.update(booking_id, points_redeemed=booking["points_redeemed"] + points,
                                    amount_paid=money(booking["amount_paid"] - credit))
    return {"booking_id": booking_id, "points_redeemed": points, "credit_usd": credit,
            "amount_paid": updated["amount_paid"], "points_balance": activity["balance_after"]}


@server.tool(
    idempotent=True,  # a repeat is refused with POINTS_ALREADY_CREDITED
    reads=["booking", "loyalty_account"],
    produces=["loyalty_activity"],
    mutates=["booking", "loyalty_account"],
    errors=["BOOKING_NOT_FOUND", "BOOKING_ALREADY_CANCELLED", "TRIP_NOT_COMPLETED", "POINTS_ALREADY_CREDITED"],
    examples=[_claimable],
    asks=("claim the missing points for {booking_id}", "claim the points I never got for {booking_id}",
          "request the loyalty points owed on {booking_id}", "get my points credited for {booking_id}"),
)
def claim_missing_points(state: TravelState, booking_id: BookingId) -> dict:
    """Claim the points of a completed trip that were never credited (booked through a partner).
    Returns the points credited and the new balance. Fails with POINTS_ALREADY_CREDITED,
    TRIP_NOT_COMPLETED (claims open once the trip has ended) or BOOKING_ALREADY_CANCELLED."""
    booking = state.bookings.get(booking_id)
    require(booking["status"] != "cancelled", f"booking {booking['confirmation_code']} was cancelled",
            reason="BOOKING_ALREADY_CANCELLED")
    if booking["points_credited"]:
        raise Conflict(f"the {booking['points_earned']} points of booking {booking['confirmation_code']} were already "
                       "credited", reason="POINTS_ALREADY_CREDITED")
    require(_when(booking["trip_end"]) <= state.now(), f"the trip ends at {booking['trip_end']}; claim after it",
            reason="TRIP_NOT_COMPLETED")
    activity = _points(state, booking["points_earned"], "claim", booking,
                       f"Missing points claimed for booking {booking['confirmation_code']}")
    state.bookings.update(booking_id, points_credited=True)
    return {"booking_id": booking_id, "points_credited": booking["points_earned"],
            "points_balance": activity["balance_after"]}


@hookimpl
def prove_register_servers(register: Any) -> None:
    register(server)
