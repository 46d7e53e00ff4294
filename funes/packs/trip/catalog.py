"""What a place is: OSM tags to category, interests, indoor, budget and visit length; user interests to labels.

A place carries labels: its interests ("history", "food", ...) and its category ("category:fort"). A user's
interest term resolves to a set of labels, and a place is relevant to the term when the two sets meet.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

INTERESTS = ("history", "culture", "architecture", "food", "shopping", "nature", "religion", "art",
             "nightlife", "photography", "family")
BUDGETS = ("budget", "mid-range", "luxury")
# Entry charges (INR, from a `charge` tag) below these are "budget", below the second "mid-range".
CHARGE_LIMITS_INR = (100, 1000)
_FUZZY_CUTOFF = 0.8  # how close a misspelt interest must be to a known word (difflib ratio)


@dataclass(frozen=True)
class Kind:
    """Defaults of one category of place."""

    interests: tuple[str, ...]
    indoor: bool
    minutes: int  # typical visit length
    budget: str


_WORSHIP = Kind(("religion", "culture", "architecture"), False, 45, "budget")
CATEGORIES = {
    "fort": Kind(("history", "architecture", "photography"), False, 120, "mid-range"),
    "palace": Kind(("history", "architecture", "culture"), False, 90, "mid-range"),
    "museum": Kind(("history", "culture", "art"), True, 90, "mid-range"),
    "gallery": Kind(("art", "culture"), True, 60, "budget"),
    "monument": Kind(("history", "architecture", "photography"), False, 60, "mid-range"),
    "temple": _WORSHIP, "mosque": _WORSHIP, "church": _WORSHIP, "gurdwara": _WORSHIP,
    "viewpoint": Kind(("nature", "photography"), False, 45, "budget"),
    "garden": Kind(("nature", "family", "photography"), False, 60, "budget"),
    "park": Kind(("nature", "family"), False, 60, "budget"),
    "zoo": Kind(("nature", "family"), False, 120, "mid-range"),
    "theme_park": Kind(("family",), False, 180, "mid-range"),
    "attraction": Kind(("culture", "photography"), False, 60, "mid-range"),
    "theatre": Kind(("culture", "art", "nightlife"), True, 120, "mid-range"),
    "cinema": Kind(("nightlife", "family"), True, 180, "budget"),
    "restaurant": Kind(("food",), True, 75, "mid-range"),
    "cafe": Kind(("food",), True, 45, "budget"),
    "street_food": Kind(("food",), False, 30, "budget"),
    "sweet_shop": Kind(("food", "shopping"), True, 30, "budget"),
    "bar": Kind(("nightlife", "food"), True, 90, "mid-range"),
    "nightclub": Kind(("nightlife",), True, 120, "luxury"),
    "market": Kind(("shopping", "culture", "photography"), False, 90, "budget"),
    "craft_shop": Kind(("shopping", "art"), True, 45, "mid-range"),
    "shop": Kind(("shopping",), True, 45, "mid-range"),
    "mall": Kind(("shopping", "family"), True, 90, "mid-range"),
}

_ANY = None
# (tag, accepted values or _ANY, category), first match wins: a palace that is also a museum is a palace.
_RULES = (
    ("castle_type", {"palace", "stately", "manor"}, "palace"), ("historic", {"palace"}, "palace"),
    ("historic", {"fort", "castle"}, "fort"),
    ("tourism", {"museum"}, "museum"), ("tourism", {"gallery"}, "gallery"), ("amenity", {"arts_centre"}, "gallery"),
    ("tourism", {"zoo", "aquarium"}, "zoo"), ("tourism", {"theme_park"}, "theme_park"),
    ("leisure", {"water_park"}, "theme_park"), ("tourism", {"viewpoint"}, "viewpoint"),
    ("amenity", {"restaurant", "food_court"}, "restaurant"), ("amenity", {"cafe", "ice_cream"}, "cafe"),
    ("amenity", {"fast_food"}, "street_food"), ("amenity", {"bar", "pub", "biergarten"}, "bar"),
    ("amenity", {"nightclub"}, "nightclub"), ("amenity", {"theatre"}, "theatre"), ("amenity", {"cinema"}, "cinema"),
    ("amenity", {"marketplace"}, "market"), ("shop", {"mall", "department_store"}, "mall"),
    ("shop", {"confectionery", "pastry", "sweets"}, "sweet_shop"),
    ("shop", {"craft", "art", "fabric", "textiles", "handicraft", "jewelry", "gift", "souvenir"}, "craft_shop"),
    ("shop", _ANY, "shop"), ("leisure", {"garden"}, "garden"), ("leisure", {"park", "nature_reserve"}, "park"),
    ("amenity", {"place_of_worship"}, "worship"), ("historic", _ANY, "monument"),
    ("tourism", {"attraction", "artwork"}, "attraction"),
)
_RELIGIONS = {"muslim": "mosque", "christian": "church", "sikh": "gurdwara"}
# Tags that add an interest beyond the category's own.
_TAG_INTERESTS = (("historic", "history"), ("heritage", "history"), ("cuisine", "food"), ("religion", "religion"),
                  ("architect", "architecture"), ("artwork_type", "art"))

_ALIASES = {
    "heritage": ("history", "architecture"), "historical": ("history",), "historic": ("history",),
    "sightseeing": ("history", "architecture", "culture"), "sight": ("history", "architecture", "culture"),
    "attraction": ("history", "architecture", "culture"), "landmark": ("history", "architecture"),
    "royal": ("category:palace", "category:fort"), "castle": ("category:fort",),
    "cultural": ("culture",), "tradition": ("culture",), "folk dance": ("category:theatre", "culture"),
    "puppet show": ("category:theatre", "culture"), "performing arts": ("category:theatre",),
    "arts": ("art",), "painting": ("art",), "crafts": ("category:craft_shop", "category:market"),
    "craft": ("category:craft_shop", "category:market"), "handicraft": ("category:craft_shop", "category:market"),
    "handloom": ("category:craft_shop", "category:market"), "textile": ("category:craft_shop", "category:market"),
    "jewellery": ("category:craft_shop", "category:market"), "jewelry": ("category:craft_shop", "category:market"),
    "gem": ("category:craft_shop", "category:market"), "souvenir": ("category:craft_shop", "category:market"),
    "bazaar": ("category:market",), "shop": ("shopping",), "buildings": ("architecture",),
    "spiritual": ("religion",), "religious": ("religion",), "worship": ("religion",),
    "cuisine": ("food",), "eating": ("food",), "dining": ("food",), "local food": ("food",),
    "street food": ("category:street_food", "category:sweet_shop"), "thali": ("food",), "lassi": ("food",),
    "vegetarian": ("food",), "coffee": ("category:cafe",), "sweet": ("category:sweet_shop",),
    "dessert": ("category:sweet_shop", "category:cafe"), "outdoors": ("nature",), "lake": ("nature",),
    "view": ("category:viewpoint", "photography"), "sunset": ("category:viewpoint", "photography"),
    "sunrise": ("category:viewpoint", "photography"), "scenic": ("category:viewpoint", "nature"),
    "photo": ("photography",), "kid": ("family",), "children": ("family",), "kid friendly": ("family",),
    "family friendly": ("family",), "night life": ("nightlife",), "pub": ("category:bar",), "club": ("nightlife",),
    "going out": ("nightlife",), "entertainment": ("nightlife", "family"),
}
_VOCABULARY = {**{i: (i,) for i in INTERESTS}, **{c.replace("_", " "): (f"category:{c}",) for c in CATEGORIES},
               **_ALIASES}
_SPLIT = re.compile(r"\s*(?:,|;|/|&|\band\b|\bor\b)\s*")


def category_of(tags: dict[str, str]) -> str | None:
    """The category a place's tags say it is, or None when no supported tag is present."""
    for key, values, category in _RULES:
        value = tags.get(key)
        if value and value != "no" and (values is _ANY or value in values):
            return _RELIGIONS.get(tags.get("religion", ""), "temple") if category == "worship" else category
    return None


def describe(tags: dict[str, str], category: str) -> dict:
    """Interests, indoor, accessibility, budget and visit minutes of a place of this category."""
    kind = CATEGORIES[category]
    interests = list(kind.interests) + [i for tag, i in _TAG_INTERESTS if tags.get(tag) and tags[tag] != "no"]
    indoor = {"yes": True, "no": False}.get(tags.get("indoor", ""), kind.indoor)
    return {"interests": list(dict.fromkeys(interests)), "indoor": indoor,
            "accessible": tags.get("wheelchair") == "yes", "budget": budget_of(tags, kind),
            "visit_minutes": kind.minutes}


def budget_of(tags: dict[str, str], kind: Kind) -> str:
    """A budget level from fee/charge tags, a reservation hint, or the category's default."""
    if tags.get("fee") == "no":
        return "budget"
    charge = re.search(r"\d+(?:\.\d+)?", tags.get("charge", "").replace(",", ""))
    if charge:
        amount = float(charge.group())
        return BUDGETS[sum(amount >= limit for limit in CHARGE_LIMITS_INR)]
    if tags.get("reservation") in ("required", "recommended") or "fine_dining" in tags.get("cuisine", ""):
        return "luxury"
    if tags.get("fee") == "yes" and kind.budget == "budget":
        return "mid-range"
    return kind.budget


def labels(category: str, interests: list[str]) -> set[str]:
    """Everything a user's interest can match on a place."""
    return {*interests, f"category:{category}"}


def resolve_interest(term: str) -> set[str] | None:
    """The labels one user interest stands for (plural, misspelt and compound forms allowed), or None."""
    found = set()
    for part in filter(None, _SPLIT.split(_normal(term))):
        hit = _lookup(part)
        if hit is None:  # "old forts", "art galleries": any known word will do
            hit = set().union(*(w for w in map(_lookup, part.split()) if w is not None))
        found |= hit
    return found or None


def _normal(term: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[_\-]", " ", term.lower())).strip()


def _lookup(word: str) -> set[str] | None:
    forms = [word, re.sub(r"ies$", "y", word), re.sub(r"es$", "", word), re.sub(r"s$", "", word)]
    for form in forms:
        if form in _VOCABULARY:
            return set(_VOCABULARY[form])
    close = difflib.get_close_matches(word, _VOCABULARY, n=1, cutoff=_FUZZY_CUTOFF)
    return set(_VOCABULARY[close[0]]) if close else None
