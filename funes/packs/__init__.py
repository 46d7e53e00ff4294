"""The built-in tool packs, one package each: cards.json (the tool cards), handlers.py (`class Pack`), data.

A pack package exposes:
- `Pack`: built with a `ToolContext`; its methods marked with `@tool` are the handlers, bound by name to
  the cards in its `cards.json`;
- optionally `metadata` (a SQLAlchemy MetaData with the pack's own tables, created by the app at start),
  `load_sample(ctx)` and importers of the user's own files, each returning an `ImportReport`.
A new pack is a new folder here and its name in the PACKS setting.
"""
