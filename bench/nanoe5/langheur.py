"""The 'does this message look non-English' heuristic, fixed a priori (not fitted to the eval sets).

It now lives in funes.selection.multilingual, where the router uses it; this name is kept for study.py.
"""
from __future__ import annotations

from funes.selection.multilingual import looks_non_english

__all__ = ["looks_non_english"]
