"""The trip pack: places from OpenStreetMap, day itineraries and a city guide."""
from funes.packs.trip.handlers import import_guide, import_pois, load_sample, metadata, Pack, write_sample

__all__ = ["import_guide", "import_pois", "load_sample", "metadata", "Pack", "write_sample"]
