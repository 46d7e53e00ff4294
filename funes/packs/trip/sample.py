"""Sample Jaipur data written by the project: ~35 places as OSM-style GeoJSON and one page of guide text.

Coordinates are approximate and the places carry no OSM ids, so their links open the map at the spot.
Tags follow OpenStreetMap conventions (tourism, historic, amenity, shop, leisure, fee, charge, wheelchair).
"""
from __future__ import annotations

import json
from pathlib import Path

POIS_FILE = "jaipur_pois.geojson"
GUIDE_FILE = "jaipur_guide.md"
GUIDE_SOURCE = "Funes sample guide"

_FREE, _WHEELCHAIR = {"fee": "no"}, {"wheelchair": "yes"}
# (name, lat, lon, tags); a few get a polygon or line below, the rest are points.
PLACES = [
    ("Hawa Mahal", 26.92389, 75.82672, {"tourism": "attraction", "historic": "palace", "fee": "yes",
                                        "charge": "200 INR", "wheelchair": "no"}),
    ("City Palace", 26.92576, 75.82366, {"historic": "castle", "castle_type": "palace", "tourism": "museum",
                                         "fee": "yes", "charge": "700 INR", "wheelchair": "limited"}),
    ("Jantar Mantar", 26.92476, 75.82457, {"historic": "monument", "tourism": "attraction", "heritage": "1",
                                           "fee": "yes", "charge": "200 INR", **_WHEELCHAIR}),
    ("Amber Fort", 26.98548, 75.85128, {"historic": "castle", "castle_type": "defensive", "tourism": "attraction",
                                        "fee": "yes", "charge": "500 INR", "wheelchair": "no"}),
    ("Nahargarh Fort", 26.93730, 75.81550, {"historic": "castle", "castle_type": "defensive", "fee": "yes",
                                            "charge": "200 INR"}),
    ("Jaigarh Fort", 26.98510, 75.84560, {"historic": "castle", "castle_type": "defensive", "fee": "yes",
                                          "charge": "200 INR"}),
    ("Jal Mahal", 26.95350, 75.84620, {"historic": "building", "tourism": "attraction", **_FREE}),
    ("Albert Hall Museum", 26.91165, 75.81946, {"tourism": "museum", "historic": "building", "fee": "yes",
                                                "charge": "150 INR", **_WHEELCHAIR}),
    ("Birla Mandir", 26.89220, 75.81550, {"amenity": "place_of_worship", "religion": "hindu", **_FREE,
                                          **_WHEELCHAIR}),
    ("Galta Ji", 26.91670, 75.85850, {"amenity": "place_of_worship", "religion": "hindu", "historic": "yes",
                                      **_FREE}),
    ("Govind Dev Ji Temple", 26.92960, 75.82360, {"amenity": "place_of_worship", "religion": "hindu", **_FREE,
                                                  "wheelchair": "limited"}),
    ("Moti Dungri Ganesh Temple", 26.89450, 75.81660, {"amenity": "place_of_worship", "religion": "hindu",
                                                       **_FREE}),
    ("Johari Bazaar", 26.92015, 75.82685, {"amenity": "marketplace", **_FREE}),
    ("Bapu Bazaar", 26.91650, 75.81950, {"amenity": "marketplace", **_FREE}),
    ("Tripolia Bazaar", 26.92380, 75.82150, {"amenity": "marketplace", **_FREE}),
    ("Chokhi Dhani", 26.76750, 75.83640, {"tourism": "attraction", "cuisine": "rajasthani", "fee": "yes",
                                          "charge": "1100 INR", "opening_hours": "17:00-23:00"}),
    ("Patrika Gate", 26.84160, 75.80050, {"tourism": "attraction", **_FREE, **_WHEELCHAIR}),
    ("Sisodia Rani Garden", 26.89320, 75.87700, {"leisure": "garden", "historic": "yes", "fee": "yes",
                                                 "charge": "50 INR"}),
    ("Panna Meena ka Kund", 26.98700, 75.85500, {"historic": "yes", "tourism": "attraction", **_FREE}),
    ("Central Park", 26.90500, 75.80700, {"leisure": "park", **_FREE, **_WHEELCHAIR}),
    ("Jawahar Kala Kendra", 26.89340, 75.81150, {"amenity": "arts_centre", "architect": "Charles Correa",
                                                 **_FREE, **_WHEELCHAIR}),
    ("Raj Mandir Cinema", 26.91530, 75.81010, {"amenity": "cinema", **_WHEELCHAIR}),
    ("Royal Gaitor", 26.95050, 75.82900, {"historic": "tomb", "fee": "yes", "charge": "30 INR"}),
    ("Anokhi Museum of Hand Printing", 26.98880, 75.85660, {"tourism": "museum", "fee": "yes", "charge": "80 INR"}),
    ("World Trade Park", 26.85440, 75.80510, {"shop": "mall", **_WHEELCHAIR}),
    ("Rajasthali Emporium", 26.91640, 75.81320, {"shop": "craft", **_WHEELCHAIR}),
    ("Laxmi Misthan Bhandar", 26.92130, 75.82670, {"amenity": "restaurant", "cuisine": "indian;sweets",
                                                   "diet:vegetarian": "only", "wheelchair": "no"}),
    ("Rawat Mishthan Bhandar", 26.92230, 75.80020, {"amenity": "fast_food", "cuisine": "indian"}),
    ("Lassiwala", 26.91700, 75.81100, {"amenity": "fast_food", "cuisine": "lassi"}),
    ("Masala Chowk", 26.91010, 75.81930, {"amenity": "food_court", "indoor": "no", "fee": "yes", "charge": "10 INR"}),
    ("Suvarna Mahal", 26.89780, 75.80810, {"amenity": "restaurant", "cuisine": "indian;fine_dining",
                                           "reservation": "required", **_WHEELCHAIR}),
    ("Niros", 26.91610, 75.80980, {"amenity": "restaurant", "cuisine": "indian;chinese", **_WHEELCHAIR}),
    ("Tapri Central", 26.90220, 75.80610, {"amenity": "cafe", "cuisine": "tea", "wheelchair": "no"}),
    ("Bar Palladio", 26.89520, 75.80930, {"amenity": "bar", "reservation": "recommended"}),
]
_HALF = 0.0006  # half the side, in degrees, of the small squares drawn for polygon places
_POLYGONS = {"Jal Mahal", "Central Park", "Albert Hall Museum"}
_LINES = {"Johari Bazaar": [(75.8265, 26.9165), (75.8272, 26.9238)]}


def sample_geojson() -> dict:
    """The sample places as a GeoJSON FeatureCollection."""
    features = []
    for name, lat, lon, tags in PLACES:
        if name in _POLYGONS:
            square = [(lon - _HALF, lat - _HALF), (lon + _HALF, lat - _HALF), (lon + _HALF, lat + _HALF),
                      (lon - _HALF, lat + _HALF), (lon - _HALF, lat - _HALF)]
            geometry = {"type": "Polygon", "coordinates": [[list(p) for p in square]]}
        elif name in _LINES:
            geometry = {"type": "LineString", "coordinates": [list(p) for p in _LINES[name]]}
        else:
            geometry = {"type": "Point", "coordinates": [lon, lat]}
        features.append({"type": "Feature", "properties": {"name": name, **tags}, "geometry": geometry})
    return {"type": "FeatureCollection", "features": features}


GUIDE = """\
# Jaipur

## History

Jaipur was founded in 1727 by Maharaja Sawai Jai Singh II, the Kachwaha ruler of Amber, who moved his capital
down from the crowded hills to the plain. The new city was laid out on a grid of broad streets and blocks,
planned with the Bengali architect Vidyadhar Bhattacharya along the lines of traditional Indian building
treatises. Jai Singh was also an astronomer: the stone instruments of Jantar Mantar, next to the City Palace,
were built for him in the early eighteenth century and are still read as a giant sundial today.

The old city's buildings were painted a terracotta pink in 1876 to welcome the Prince of Wales, and the
"Pink City" name stuck; the old city's facades still keep the colour. Hawa Mahal, the honeycombed palace facade with
hundreds of small windows, was added in 1799 so that the women of the court could watch street life unseen.
Jaipur became the capital of Rajasthan after independence. The walled city is a UNESCO World Heritage Site,
as are Jantar Mantar and Amber Fort (one of the hill forts of Rajasthan).

## Getting around

The old city is compact enough to walk between Hawa Mahal, the City Palace, Jantar Mantar and the bazaars,
though traffic is heavy and pavements are few. App cabs are the easiest way to cross the wider city and are
reliable late at night. Auto-rickshaws rarely use a meter, so agree the fare before you get in;
e-rickshaws cover short hops cheaply. A metro line links the south-west suburbs with the old city at Badi
Chaupar.

Amber Fort lies about 11 km north of the old city; hiring a car and driver for a day lets you combine it with
Jaigarh and Nahargarh forts and a stop at Jal Mahal. A composite ticket covers several monuments over two
days and saves queueing at each gate.

## Etiquette

Dress modestly, especially at temples and other religious sites: clothes that cover the shoulders and the
knees are the expected dress code for men and women alike, and a light scarf is handy. Take your shoes off
before entering a temple or a home, and leave leather items outside where a sign asks you to.

Ask before photographing people; some will ask for a small payment, and a refusal should be respected.
Give, receive and eat with the right hand. Greeting with a "namaste" is always welcome. Bargaining is normal
in the bazaars, but not in fixed-price emporiums or restaurants. A tip of about ten percent is usual in
restaurants, and small tips for drivers and guides are appreciated. Public displays of affection are
frowned upon.

## Safety

Jaipur is generally safe for visitors, including women travelling alone, with the usual care. The most
common trouble is touts: drivers and "guides" who earn commission steering you to shops, and the gem scam,
where a friendly stranger offers a deal to buy stones for resale abroad. Decline politely and walk on.

After dark, prefer app cabs to hailing a rickshaw in quiet streets. Drink bottled or filtered water. The
monkeys at Galta Ji are used to people but can snatch food and bags, so keep snacks out of sight. In summer
the heat is a real risk: carry water, cover your head and plan the outdoor sights for early morning.

## Best time to visit

The best season is October to March, when days are warm and dry and evenings pleasant; December and January
nights can be cold, and air quality can dip on still winter days. April to June is very hot, often above
40 degrees Celsius. The monsoon, roughly July to September, brings humidity, short heavy showers and greener
hills, and fewer crowds.

Festivals add colour: kites fill the sky for Makar Sankranti in mid-January, the Jaipur Literature Festival
takes place in late January, Gangaur processions follow Holi in spring, Teej celebrates the monsoon, and the
bazaars are lit up for Diwali in October or November.

## Food

Rajasthani food is rich and mostly vegetarian. Try dal baati churma (baked wheat balls with lentils and a
sweet crumble), gatte ki sabzi (gram-flour dumplings in a yoghurt curry) and ker sangri (desert beans and
berries); meat eaters can try laal maas, a fiery red mutton curry. A thali is the easiest way to taste many
dishes at once.

For snacks, pyaaz kachori and mirchi vada are the breakfast of the old city, and thick lassi served in clay
cups is a local habit. Ghewar, a honeycomb-like sweet, is made especially around the monsoon festivals.
At street stalls, choose busy ones where food is fried fresh in front of you.
"""


def write_sample(directory: Path) -> list[Path]:
    """Write the sample places and guide text into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pois_path, guide_path = directory / POIS_FILE, directory / GUIDE_FILE
    pois_path.write_text(json.dumps(sample_geojson(), indent=1, ensure_ascii=False), encoding="utf-8")
    guide_path.write_text(GUIDE, encoding="utf-8")
    return [pois_path, guide_path]
