"""The trip pack's tables, and places imported into them from OpenStreetMap extracts."""
from __future__ import annotations

import logging
import re
from pathlib import Path

from sqlalchemy import (JSON, Boolean, Column, Float, Integer, LargeBinary, MetaData, String, Table, Text, delete,
                        func, insert, select)
from sqlalchemy.engine import Engine

from funes.tools.context import ImportReport, ToolContext
from funes.packs.trip.catalog import category_of, describe
from funes.packs.trip.osm import Feature, read_features

log = logging.getLogger(__name__)

metadata = MetaData()

pois = Table(
    "trip_pois", metadata,
    Column("id", String(64), primary_key=True),        # node/123, way/456, or place/<name> without an OSM id
    Column("name", Text, nullable=False),
    Column("lat", Float, nullable=False),
    Column("lon", Float, nullable=False),
    Column("category", String(32), nullable=False, index=True),
    Column("interests", JSON, nullable=False),
    Column("indoor", Boolean, nullable=False),
    Column("accessible", Boolean, nullable=False),     # wheelchair=yes
    Column("budget", String(16), nullable=False),      # budget | mid-range | luxury
    Column("visit_minutes", Integer, nullable=False),
    Column("source", Text, nullable=False),
    Column("source_url", Text, nullable=False),
    Column("tags", JSON, nullable=False),
)

guide_chunks = Table(
    "trip_guide_chunks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("section", Text, nullable=False),
    Column("section_anchor", Text, nullable=False),
    Column("position", Integer, nullable=False),       # order within the guide
    Column("text", Text, nullable=False),
    Column("vector", LargeBinary, nullable=False),     # float32 unit vector of "page title: section. text"
)

_BATCH = 500  # ids per DELETE ... IN (...), under SQLite's parameter limit


def import_pois(ctx: ToolContext, path: str | Path) -> ImportReport:
    """Import named places from an `.osm` XML or GeoJSON extract; re-importing a place replaces it."""
    path = Path(path)
    report, rows = ImportReport(str(path)), {}
    for feature in read_features(path):
        row, reason = poi_row(feature, source=path.name)
        if row is not None and row["id"] in rows:
            row, reason = None, f"duplicate of an earlier feature ({row['id']})"
        if row is None:
            report.skipped.append((feature.where, f"{feature.ref}: {reason}"))
        else:
            rows[row["id"]] = row
    store_pois(ctx.engine, list(rows.values()))
    report.imported = len(rows)
    log.info("imported %d places from %s (%d skipped)", report.imported, path, len(report.skipped))
    return report


def poi_row(feature: Feature, source: str) -> tuple[dict | None, str | None]:
    """A trip_pois row for a feature, or None and why it was skipped."""
    tags = feature.tags
    category = category_of(tags)
    if category is None:
        return None, feature.problem if not tags and feature.problem else f"unsupported tags ({_main_tags(tags)})"
    name = (tags.get("name:en") or tags.get("name") or "").strip()
    if not name:
        return None, f"no name ({category})"
    if feature.problem:
        return None, feature.problem
    if feature.osm_id:
        kind, ident = feature.osm_type, feature.osm_id
        url, origin = f"https://www.openstreetmap.org/{kind}/{ident}", "openstreetmap"
        key = f"{kind}/{ident}"
    else:
        lat, lon = round(feature.lat, 5), round(feature.lon, 5)
        url, origin = f"https://www.openstreetmap.org/?mlat={lat}&mlon={lon}#map=18/{lat}/{lon}", source
        key = "place/" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return {"id": key, "name": name, "lat": round(feature.lat, 7), "lon": round(feature.lon, 7), "category": category,
            **describe(tags, category), "source": origin, "source_url": url, "tags": tags}, None


def _main_tags(tags: dict[str, str]) -> str:
    keys = ("tourism", "historic", "amenity", "shop", "leisure", "highway", "building", "landuse", "natural")
    shown = [f"{k}={tags[k]}" for k in keys if k in tags][:2]
    return ", ".join(shown) or "no tourism, historic, amenity, shop or leisure tag"


def store_pois(engine: Engine, rows: list[dict]) -> None:
    """Insert places, replacing any stored under the same id."""
    ids = [r["id"] for r in rows]
    with engine.begin() as conn:
        for i in range(0, len(ids), _BATCH):
            conn.execute(delete(pois).where(pois.c.id.in_(ids[i:i + _BATCH])))
        if rows:
            conn.execute(insert(pois), rows)


def query_pois(engine: Engine, *, budgets: list[str] | None = None, indoor_only: bool = False,
               accessible_only: bool = False, max_minutes: int | None = None) -> list[dict]:
    """Stored places passing the hard filters, as dicts."""
    query = select(pois)
    if budgets:
        query = query.where(pois.c.budget.in_(budgets))
    if indoor_only:
        query = query.where(pois.c.indoor.is_(True))
    if accessible_only:
        query = query.where(pois.c.accessible.is_(True))
    if max_minutes:
        query = query.where(pois.c.visit_minutes <= max_minutes)
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query.order_by(pois.c.id))]


def find_poi(engine: Engine, ident: str | None, name: str | None) -> dict | None:
    """A stored place by id, else by name (case-insensitive)."""
    with engine.connect() as conn:
        if ident:
            row = conn.execute(select(pois).where(pois.c.id == str(ident))).first()
            if row is not None:
                return dict(row._mapping)
        if name:
            row = conn.execute(select(pois).where(func.lower(pois.c.name) == name.strip().lower())).first()
            return dict(row._mapping) if row is not None else None
    return None


def count_rows(engine: Engine, table: Table) -> int:
    """How many rows a trip table holds."""
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()
