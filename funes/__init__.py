"""Funes: a local-first tool router for LLM assistants."""
