"""What a conversation and a caller's tool cards must look like, checked in one place for the API and the router."""
from __future__ import annotations

import json
from typing import Any

from funes.errors import BadRequest, TooLarge

ROLES = ("user", "assistant", "system", "tool")
MODES = ("decide", "shortlist")  # /route: the router's decision alone, or also a shortlist for a choosing client
SHORTLIST_K, MAX_SHORTLIST_K = 5, 10  # a shortlist draws on a Decision's candidates (CANDIDATES_LOGGED, 10)


def check_mode(value: Any) -> str:
    if value not in MODES:
        raise BadRequest(f"'mode' must be one of {', '.join(MODES)}")
    return value


def check_top_k(value: Any, name: str = "top_k") -> int:
    """How many tools a shortlist may hold: an integer from 1 to MAX_SHORTLIST_K."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHORTLIST_K:
        raise BadRequest(f"'{name}' must be an integer from 1 to {MAX_SHORTLIST_K}")
    return value


def check_message(value: Any, max_chars: int, name: str = "message") -> str:
    """A user's message, stripped: a non-empty string of at most `max_chars` characters."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"'{name}' must be a non-empty string")
    if len(value) > max_chars:
        raise BadRequest(f"'{name}' is longer than {max_chars} characters")
    return value.strip()


def message_text(content: Any) -> str | None:
    """A message's text: a string, the text parts of OpenAI's content list joined, "" for null (an assistant
    turn that only calls tools); None for anything else."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p.get("text") for p in content if p.get("type") == "text"]
        return " ".join(texts) if all(isinstance(t, str) for t in texts) else None  # a text part without text: bad
    return None


def check_messages(messages: Any, max_messages: int | None = None, max_chars: int | None = None) -> list[dict]:
    """A conversation as a list of {role, content} ending in a user message; one string is one user message.
    OpenAI's shapes are read as they come (null content beside tool_calls, a list of text parts)."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content}, or one string (a user message)")
    if max_messages is not None and len(messages) > max_messages:
        raise BadRequest(f"'messages' holds more than {max_messages} messages")
    checked = []
    for i, m in enumerate(messages):
        text = message_text(m.get("content")) if isinstance(m, dict) else None
        if text is None or m.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}] needs a 'role' ({', '.join(ROLES)}) and a 'content': a string, "
                             "a list of text parts, or null")
        if max_chars is not None and len(text) > max_chars:
            raise BadRequest(f"messages[{i}] is longer than {max_chars} characters")
        checked.append({"role": m["role"], "content": text})
    if checked[-1]["role"] != "user" or not checked[-1]["content"].strip():
        raise BadRequest("the last message must be a non-empty user message")
    return checked


def user_turns(messages: Any) -> tuple[str, list[str]]:
    """The message to route and the earlier user turns of a checked conversation."""
    messages = check_messages(messages)
    earlier = [m["content"] for m in messages[:-1] if m["role"] == "user" and m["content"].strip()]
    return messages[-1]["content"].strip(), earlier


def check_caller_cards(tools: Any, s: dict[str, Any]) -> list:
    """`check_cards` under the request limits in settings `s` (POST /route and the proxy alike)."""
    return check_cards(tools, s["MAX_REQUEST_TOOLS"], s["MAX_CARD_CHARS"], s["MAX_REQUEST_TEXTS"],
                       max_patterns=s["MAX_REQUEST_PATTERNS"], max_total_chars=s["MAX_REQUEST_CARDS_CHARS"])


def check_cards(tools: Any, max_cards: int, max_chars: int, max_texts: int, *, max_patterns: int | None = None,
                max_total_chars: int | None = None) -> list:
    """A caller's tool cards within the request limits, checked before any work starts (None: no such limit).

    At most `max_cards` cards, each at most `max_chars` as JSON and all at most `max_total_chars`;
    `max_patterns` keyword patterns, and `max_texts` examples, negatives and patterns in all."""
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tool cards")
    if len(tools) > max_cards:
        raise BadRequest(f"'tools' holds more than {max_cards} cards (MAX_REQUEST_TOOLS)")
    sizes = [len(json.dumps(card, ensure_ascii=False)) for card in tools]
    for i, size in enumerate(sizes):  # a 20 MB description costs gigabytes once embedded and classified
        if size > max_chars:
            raise BadRequest(f"tool card {i} is longer than {max_chars} characters as JSON (MAX_CARD_CHARS)")
    if max_total_chars is not None and sum(sizes) > max_total_chars:  # every card is embedded on the request thread
        raise TooLarge(f"'tools' hold more than {max_total_chars} characters in all as JSON (MAX_REQUEST_CARDS_CHARS)")
    patterns = sum(_count(card, ("keywords",)) for card in tools)  # each is tried on every message
    if max_patterns is not None and patterns > max_patterns:
        raise BadRequest(f"'tools' carry more than {max_patterns} keyword patterns in all (MAX_REQUEST_PATTERNS)")
    # examples train a classifier on the request thread: its time and memory grow with them
    if sum(_count(card, ("examples", "negatives")) for card in tools) + patterns > max_texts:
        raise BadRequest(f"'tools' carry more than {max_texts} examples and negatives in all, keyword patterns "
                         "counted (MAX_REQUEST_TEXTS)")
    return tools


def _count(card: Any, keys: tuple[str, ...]) -> int:
    """How many texts of these lists (examples, negatives, keywords) a card carries, written or generated."""
    if not isinstance(card, dict):
        return 0
    blocks = [card, card["generated"]] if isinstance(card.get("generated"), dict) else [card]
    return sum(len(b[k]) for b in blocks for k in keys if isinstance(b.get(k), list))
