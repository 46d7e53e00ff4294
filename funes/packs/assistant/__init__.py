"""The assistant pack: weather from Open-Meteo, and the date and time anywhere."""
from funes.packs.assistant.handlers import Pack

__all__ = ["Pack"]
