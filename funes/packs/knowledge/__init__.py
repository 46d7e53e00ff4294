"""The knowledge pack: the app's own documentation, web search, and a plain answer."""
from funes.packs.knowledge.handlers import Pack

__all__ = ["Pack"]
