"""Who is calling. An API key names its user; while no key is in force, Funes is open for local use.

A key comes as `X-API-Key: <key>`, `Authorization: Bearer <key>`, or HTTP Basic with the key as the
password (so a browser can open the inspector). X-API-Key is read first, so a proxied OpenAI client can
keep its own `Authorization` for the upstream.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from flask import current_app, g, request

from funes.errors import Forbidden, Unauthorized

# Endpoints anyone may reach: liveness, readiness, the API's own description, the chat page's script.
PUBLIC = frozenset({"api.healthz", "api.readyz", "api.openapi", "inspector.static"})


@dataclass(frozen=True)
class Caller:
    """The identity a request acts as."""

    user: str | None  # None while no key is in force: the body's user_id counts, as before keys
    operator: bool
    header: str | None = None  # the header that carried the key; it is not forwarded upstream

    @property
    def keyed(self) -> bool:
        return self.user is not None


OPEN = Caller(None, operator=True)


def presented_key(headers) -> tuple[str | None, str | None]:
    """The key a request carries and the header it came in, or (None, None)."""
    if headers.get("X-API-Key"):
        return headers["X-API-Key"].strip(), "X-API-Key"
    scheme, _, value = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), "Authorization"
    if scheme.lower() == "basic":
        try:
            _, _, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None, None
        return (password, "Authorization") if password else (None, None)
    return None, None


def identify(keys, headers) -> Caller:
    """The caller behind these headers; Unauthorized when keys are in force and none of them is presented."""
    if not keys.any():
        return OPEN  # an Authorization header then belongs to the upstream (the proxy passes it on)
    key, header = presented_key(headers)
    if key is None:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    who = keys.identify(key)
    if who is None:
        raise Unauthorized("unknown or revoked API key")
    return Caller(who.user, who.operator, header)


def before_request() -> None:
    """Identify every request but the public ones (and those no route matches: they are a 404)."""
    if request.endpoint is None or request.endpoint in PUBLIC or request.endpoint == "static":
        return
    g.caller = identify(current_app.extensions["funes"].keys, request.headers)


def caller() -> Caller:
    return g.get("caller", OPEN)


def require_operator(action: str) -> None:
    if not caller().operator:
        raise Forbidden(f"{action} is an operator action; this key's user is not an operator")


def acting_user(claimed: str | None) -> str | None:
    """The user a turn acts for: the key's user (a different `user_id` in the body is a 403), else the body's."""
    who = caller()
    if not who.keyed:
        return claimed
    if claimed is not None and claimed != who.user:
        raise Forbidden("'user_id' does not match the API key's user (leave it out: the key names the user)")
    return who.user


def visible_user() -> str | None:
    """Whose decisions this caller may read: None for everyone's (an operator), else only their own."""
    who = caller()
    return None if who.operator else who.user


def forwarded_headers() -> dict[str, str]:
    """The request's headers for an upstream, without the one that carried Funes' key."""
    drop = caller().header
    return {k: v for k, v in request.headers.items() if drop is None or k.lower() != drop.lower()}
