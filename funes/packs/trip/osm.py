"""Read places out of OpenStreetMap extracts: `.osm` XML (nodes and ways) and GeoJSON, plus the geometry they need."""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from funes.errors import BadRequest

OSM_SUFFIXES = (".osm", ".xml")
GEOJSON_SUFFIXES = (".geojson", ".json")
_EARTH_RADIUS_KM = 6371.0088
_NOISE_TAGS = {"created_by", "source", "note", "fixme"}  # tags that do not make an element a feature
_ID_PROPERTIES = {"@id", "id", "osm_id", "osm_type", "tags"}  # GeoJSON properties that are not OSM tags


@dataclass
class Feature:
    """One tagged element of an extract, before it is judged a place or skipped."""

    where: int                       # element or feature number in the file, for the import report
    osm_type: str | None             # node | way | relation, None when the file gives no OSM id
    osm_id: str | None
    tags: dict[str, str] = field(default_factory=dict)
    lat: float | None = None
    lon: float | None = None
    problem: str | None = None       # why its geometry cannot be used

    @property
    def ref(self) -> str:
        """`node/123`, or the feature number when the file gives no OSM id."""
        return f"{self.osm_type}/{self.osm_id}" if self.osm_id else f"feature {self.where}"


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance between two points in kilometres."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * _EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def valid_point(lat, lon) -> bool:
    """Whether lat/lon are finite degrees in range (and not the 0,0 placeholder)."""
    if isinstance(lat, bool) or isinstance(lon, bool) or not all(isinstance(v, (int, float)) for v in (lat, lon)):
        return False
    return -90 <= lat <= 90 and -180 <= lon <= 180 and (lat, lon) != (0, 0) and math.isfinite(lat + lon)


def centroid(ring: list[tuple[float, float]]) -> tuple[float, float]:
    """Area-weighted centroid (lat, lon) of a ring of (lon, lat) points; the vertex mean when it has no area."""
    points = ring[:-1] if len(ring) > 1 and ring[0] == ring[-1] else ring
    ox, oy = points[0]
    local = [(x - ox, y - oy) for x, y in points]  # around the first vertex, so large degrees do not cancel
    area = cx = cy = 0.0
    for (x0, y0), (x1, y1) in zip(local, local[1:] + local[:1]):
        cross = x0 * y1 - x1 * y0
        area, cx, cy = area + cross, cx + (x0 + x1) * cross, cy + (y0 + y1) * cross
    if abs(area) < 1e-14:
        return sum(y for _, y in points) / len(points), sum(x for x, _ in points) / len(points)
    return oy + cy / (3 * area), ox + cx / (3 * area)


def read_features(path: Path) -> Iterator[Feature]:
    """The tagged features of an extract, by file suffix."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise BadRequest(f"{path}: file not found")
    if suffix in OSM_SUFFIXES:
        return read_osm_xml(path)
    if suffix in GEOJSON_SUFFIXES:
        return read_geojson(path)
    raise BadRequest(f"{path}: unsupported file type {suffix or '(none)'!r}; use an .osm XML extract or .geojson "
                     "(convert a .pbf first: osmium cat extract.osm.pbf -o extract.osm)")


def read_osm_xml(path: Path) -> Iterator[Feature]:
    """Nodes and ways with tags from OSM XML; a way sits at the centroid of its nodes."""
    coords: dict[str, tuple[float, float]] = {}
    number = 0
    try:
        for _, elem in ET.iterparse(path, events=("end",)):
            if elem.tag not in ("node", "way", "relation"):
                continue
            number += 1
            feature = _osm_element(elem, number, coords)
            elem.clear()
            if feature is not None:
                yield feature
    except ET.ParseError as e:
        raise BadRequest(f"{path}: not valid OSM XML ({e})") from None


def _osm_element(elem: ET.Element, number: int, coords: dict) -> Feature | None:
    tags = {t.get("k"): t.get("v", "") for t in elem.iter("tag") if t.get("k")}
    feature = Feature(number, elem.tag, elem.get("id"), tags)
    if elem.tag == "node":
        try:
            feature.lat, feature.lon = float(elem.get("lat")), float(elem.get("lon"))
        except (TypeError, ValueError):
            feature.problem = "bad coordinates (node without a numeric lat/lon)"
        if valid_point(feature.lat, feature.lon):
            coords[feature.osm_id] = (feature.lon, feature.lat)
        elif not feature.problem:
            feature.problem = f"bad coordinates ({elem.get('lat')}, {elem.get('lon')})"
    elif elem.tag == "way":
        ring = [coords[nd.get("ref")] for nd in elem.iter("nd") if nd.get("ref") in coords]
        if ring:
            feature.lat, feature.lon = centroid(ring)
        else:
            feature.problem = "bad coordinates (none of the way's nodes are in the extract)"
    else:
        feature.problem = "relations are not supported (only nodes and ways)"
    return feature if set(tags) - _NOISE_TAGS else None


def read_geojson(path: Path) -> Iterator[Feature]:
    """Features of a GeoJSON FeatureCollection; polygons sit at their centroid."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"{path}: not valid GeoJSON ({e})") from None
    features = data.get("features") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("type") == "Feature":
        features = [data]
    if not isinstance(features, list):
        raise BadRequest(f"{path}: not a GeoJSON FeatureCollection (no 'features' list)")
    for number, item in enumerate(features, 1):
        yield _geojson_feature(item, number)


def _geojson_feature(item, number: int) -> Feature:
    if not isinstance(item, dict):
        return Feature(number, None, None, problem="not a GeoJSON feature object")
    props = item.get("properties") if isinstance(item.get("properties"), dict) else {}
    nested = props.get("tags") if isinstance(props.get("tags"), dict) else {}
    geometry = item.get("geometry") if isinstance(item.get("geometry"), dict) else {}
    osm_type, osm_id = _osm_ref(item, props, geometry.get("type"))
    tags = {k: str(v) for k, v in {**props, **nested}.items()
            if v is not None and not isinstance(v, (dict, list)) and k not in _ID_PROPERTIES}
    feature = Feature(number, osm_type, osm_id, tags)
    point = _geometry_point(geometry)
    if point is None or not valid_point(*point):
        feature.problem = f"bad coordinates ({geometry.get('type') or 'no'} geometry)"
    else:
        feature.lat, feature.lon = point
    return feature


def _osm_ref(item: dict, props: dict, geometry_type: str | None) -> tuple[str | None, str | None]:
    """(type, id) from `node/123` ids (Overpass, osmtogeojson), osm_type/osm_id properties, or a bare number."""
    for raw in (item.get("id"), props.get("@id"), props.get("id")):
        kind, _, number = str(raw or "").partition("/")
        if kind in ("node", "way", "relation") and number.isdigit():
            return kind, number
    if props.get("osm_type") in ("node", "way", "relation") and str(props.get("osm_id", "")).isdigit():
        return props["osm_type"], str(props["osm_id"])
    if str(item.get("id", "")).isdigit():
        return ("node" if geometry_type == "Point" else "way"), str(item["id"])
    return None, None


def _geometry_point(geometry: dict) -> tuple[float, float] | None:
    """(lat, lon) standing for a Point, LineString, Polygon or MultiPolygon (its largest part)."""
    kind, coords = geometry.get("type"), geometry.get("coordinates")
    try:
        if kind == "Point":
            return float(coords[1]), float(coords[0])
        if kind == "LineString":
            return centroid([(float(x), float(y)) for x, y, *_ in coords[:1] + coords[-1:]])
        if kind == "Polygon":
            return centroid([(float(x), float(y)) for x, y, *_ in coords[0]])
        if kind == "MultiPolygon":
            rings = [[(float(x), float(y)) for x, y, *_ in polygon[0]] for polygon in coords]
            return centroid(max(rings, key=lambda r: abs(_area(r))))
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return None


def _area(ring: list[tuple[float, float]]) -> float:
    return sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(ring, ring[1:] + ring[:1])) / 2
