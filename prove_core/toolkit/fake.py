"""Deterministic fake data for seeding servers.

Our own small word lists rather than a faker library: a training corpus names entities from
the live state, so a seed must give the same people, places and products in every future
version — an upstream data update would silently orphan old corpora.
"""

from __future__ import annotations

import datetime as dt
import random

FIRST_NAMES = (
    "Aisha", "Alejandro", "Amara", "Anders", "Ananya", "Beatriz", "Bilal", "Camille", "Chen", "Chiara",
    "Daniel", "Dmitri", "Elena", "Emeka", "Fatima", "Felix", "Grace", "Hana", "Hiroshi", "Ingrid",
    "Isabel", "Jamal", "Jonas", "Julia", "Kai", "Kavya", "Laila", "Liam", "Lucia", "Malik",
    "Maria", "Mateo", "Mei", "Nadia", "Niamh", "Noah", "Olga", "Omar", "Priya", "Rafael",
    "Rosa", "Samuel", "Sofia", "Tariq", "Tomasz", "Valentina", "Wei", "Yara", "Yusuf", "Zoe",
)
LAST_NAMES = (
    "Abara", "Andersson", "Bauer", "Bianchi", "Castillo", "Chowdhury", "Costa", "Dubois", "Eriksen", "Fischer",
    "Garcia", "Haddad", "Hoang", "Ivanova", "Jensen", "Kapoor", "Kim", "Kowalski", "Larsen", "Lopez",
    "Mensah", "Moreau", "Murphy", "Nakamura", "Nguyen", "Novak", "Okafor", "Olsen", "Patel", "Petrov",
    "Quinn", "Rahman", "Reyes", "Rossi", "Sato", "Schmidt", "Silva", "Singh", "Tanaka", "Torres",
    "Usman", "Varga", "Wang", "Weber", "Williams", "Xu", "Yamamoto", "Yilmaz", "Zhang", "Zielinski",
)
CITIES = (
    ("Austin", "TX", "78701"), ("Boston", "MA", "02108"), ("Chicago", "IL", "60601"), ("Denver", "CO", "80202"),
    ("Miami", "FL", "33130"), ("Portland", "OR", "97201"), ("Seattle", "WA", "98101"), ("Atlanta", "GA", "30303"),
    ("Phoenix", "AZ", "85004"), ("Minneapolis", "MN", "55401"), ("Pittsburgh", "PA", "15222"), ("San Diego", "CA", "92101"),
)
STREETS = (
    "Maple Ave", "Oak St", "Cedar Ln", "Elm St", "Pine Rd", "Lakeview Dr", "Hillcrest Blvd", "River Rd",
    "Sunset Ave", "Highland Ave", "Park Pl", "Washington St", "Jefferson Ave", "Mill St", "Willow Way",
)
EMAIL_DOMAINS = ("example.com", "mail.example.org", "inbox.example.net")


def person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def full_name(rng: random.Random) -> str:
    first, last = person(rng)
    return f"{first} {last}"


def email_for(name: str, rng: random.Random, taken: set[str] | None = None) -> str:
    base = name.lower().replace(" ", ".")
    for n in range(1000):
        candidate = f"{base}{'' if n == 0 else n}@{rng.choice(EMAIL_DOMAINS)}"
        if taken is None or candidate not in taken:
            if taken is not None:
                taken.add(candidate)
            return candidate
    raise RuntimeError("could not make a unique e-mail address")


def phone(rng: random.Random) -> str:
    return f"+1-{rng.randint(201, 989)}-555-{rng.randint(0, 9999):04d}"


def address(rng: random.Random) -> dict[str, str]:
    city, region, postal = rng.choice(CITIES)
    return {
        "line1": f"{rng.randint(10, 9899)} {rng.choice(STREETS)}",
        "city": city,
        "region": region,
        "postal_code": postal,
        "country": "US",
    }


def money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def date_between(rng: random.Random, start: dt.date, end: dt.date) -> dt.date:
    return start + dt.timedelta(days=rng.randint(0, (end - start).days))


def digits(rng: random.Random, n: int) -> str:
    return "".join(str(rng.randint(0, 9)) for _ in range(n))
