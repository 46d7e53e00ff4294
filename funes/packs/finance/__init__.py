"""The finance pack: bank transactions imported from CSV, searched and summed."""
from funes.packs.finance.handlers import import_file, load_sample, metadata, Pack, transactions, write_sample

__all__ = ["import_file", "load_sample", "metadata", "Pack", "transactions", "write_sample"]
