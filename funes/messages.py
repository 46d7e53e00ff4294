"""What a conversation and a caller's tool cards must look like, checked in one place for the API and the router."""
from __future__ import annotations

import json
from typing import Any

from funes.errors import BadRequest

ROLES = ("user", "assistant", "system", "tool")


def check_message(value: Any, max_chars: int, name: str = "message") -> str:
    """A user's message, stripped: a non-empty string of at most `max_chars` characters."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"'{name}' must be a non-empty string")
    if len(value) > max_chars:
        raise BadRequest(f"'{name}' is longer than {max_chars} characters")
    return value.strip()


def check_messages(messages: Any, max_messages: int | None = None, max_chars: int | None = None) -> list[dict]:
    """A conversation as a list of {role, content} ending in a user message; one string is one user message."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content}, or one string (a user message)")
    if max_messages is not None and len(messages) > max_messages:
        raise BadRequest(f"'messages' holds more than {max_messages} messages")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            raise BadRequest("each message needs a 'role' (user/assistant) and a string 'content'")
        if max_chars is not None and len(m["content"]) > max_chars:
            raise BadRequest(f"a message is longer than {max_chars} characters")
    if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
        raise BadRequest("the last message must be a non-empty user message")
    return messages


def user_turns(messages: Any) -> tuple[str, list[str]]:
    """The message to route and the earlier user turns of a checked conversation."""
    messages = check_messages(messages)
    earlier = [m["content"] for m in messages[:-1] if m["role"] == "user" and m["content"].strip()]
    return messages[-1]["content"].strip(), earlier


def check_cards(tools: Any, max_cards: int, max_chars: int, max_texts: int) -> list:
    """A caller's tool cards: at most `max_cards`, each at most `max_chars` as JSON, `max_texts` examples in all."""
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tool cards")
    if len(tools) > max_cards:
        raise BadRequest(f"'tools' holds more than {max_cards} cards")
    for i, card in enumerate(tools):  # a 20 MB description costs gigabytes once embedded and classified
        if len(json.dumps(card, ensure_ascii=False)) > max_chars:
            raise BadRequest(f"tool card {i} is longer than {max_chars} characters as JSON")
    # examples train a classifier on the request thread: its time and memory grow with them
    if sum(_texts(card) for card in tools) > max_texts:
        raise BadRequest(f"'tools' carry more than {max_texts} examples and negatives in all")
    return tools


def _texts(card: Any) -> int:
    """How many example and negative texts a card carries, written or generated."""
    if not isinstance(card, dict):
        return 0
    blocks = [card, card["generated"]] if isinstance(card.get("generated"), dict) else [card]
    return sum(len(b[k]) for b in blocks for k in ("examples", "negatives") if isinstance(b.get(k), list))
