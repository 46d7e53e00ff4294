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

from funes.errors import BadRequest, Forbidden, Unauthorized

# Endpoints anyone may reach: liveness, readiness, the API's own description, the chat page's script.
PUBLIC = frozenset({"api.healthz", "api.readyz", "api.openapi", "inspector.static"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})  # a server bound to every address names none of them


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
    """Identify every request but the public ones (and those no route matches: they are a 404); refuse a
    state-changing request a browser sent from another site (CSRF), unless its origin is in ALLOWED_ORIGINS."""
    if request.endpoint is None or request.endpoint in PUBLIC or request.endpoint == "static":
        return
    allowed = _allowed_origin()
    if request.method == "OPTIONS" and allowed:
        return  # a CORS preflight carries no key: the request it asks about must
    if request.method not in SAFE_METHODS and not allowed:  # /mcp too: another port of localhost is another origin
        same_origin(request.headers, request.host)
    g.caller = identify(current_app.extensions["funes"].keys, request.headers)


def _allowed_origin() -> str | None:
    """The request's Origin where ALLOWED_ORIGINS lists it."""
    origin = request.headers.get("Origin", "").rstrip("/")
    allowed = {o.rstrip("/").lower() for o in current_app.extensions["funes"].settings["ALLOWED_ORIGINS"]}
    return origin if origin and origin.lower() in allowed else None


def cors(response):
    """CORS headers for a page of an allowed origin: what it may send (an MCP client's headers) and read."""
    origin = _allowed_origin()
    if origin:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
        response.headers["Access-Control-Allow-Headers"] = ("Authorization, X-API-Key, Content-Type, Accept, "
                                                            "Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID")
        response.headers["Access-Control-Expose-Headers"] = "Mcp-Session-Id"
        response.headers["Access-Control-Max-Age"] = "600"
    response.vary.add("Origin")  # a cache must not hand one origin's answer to another
    return response


def check_host() -> None:
    """A 400 for a Host header outside ALLOWED_HOSTS and the server's own address: a page on a name the
    attacker points at 127.0.0.1 (DNS rebinding) reads nothing. Probes of /healthz and /readyz pass."""
    allowed = current_app.extensions["funes"].settings["ALLOWED_HOSTS"]
    if "*" in allowed or request.endpoint in PUBLIC:
        return
    host = _hostname(request.host)
    bound = _hostname(request.environ.get("SERVER_NAME", ""))
    if host not in {h.lower() for h in allowed} and (bound in WILDCARD_BINDS or host != bound):
        raise BadRequest(f"Host {request.host!r} is not allowed here; add its name to ALLOWED_HOSTS")


def _hostname(host: str) -> str:
    """`host[:port]` or `[v6]:port` without the port and brackets, lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def same_origin(headers, host: str) -> None:
    """Forbidden for a request a browser says came from another site (Sec-Fetch-Site) or origin (Origin).
    Clients that send neither (SDKs, curl) are not browsers and pass."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None:  # the browser's own word; Origin may be "null" (the inspector's no-referrer policy)
        if site in ("same-origin", "none"):  # "none": typed or bookmarked by the user
            return
        raise Forbidden(f"a {site} request may not change anything here (cross-site request refused)")
    origin = headers.get("Origin")
    if origin is not None and origin.partition("://")[2].rstrip("/").lower() != host.lower():
        raise Forbidden("a request from another origin may not change anything here (cross-site request refused)")


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
