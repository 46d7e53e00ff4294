"""The watch_history pack: YouTube watch history from Google Takeout."""
from funes.packs.watch_history.handlers import import_file, load_sample, metadata, Pack, write_sample

__all__ = ["import_file", "load_sample", "metadata", "Pack", "write_sample"]
