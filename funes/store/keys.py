"""API keys: each names a user (and whether that user is an operator). Only a key's hash is stored."""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import insert, select, update

from funes.errors import BadRequest, NotFound
from funes.store.db import Database, api_keys

KEY_PREFIX = "funes_"


@dataclass(frozen=True)
class Identity:
    """Who a key belongs to."""

    user: str
    operator: bool


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def check_user(user: Any) -> str:
    """A user id a key may name: a non-empty string of at most 128 characters."""
    if not isinstance(user, str) or not user.strip() or len(user) > 128 or not user.isprintable():
        raise BadRequest("a key's user must be a non-empty printable string of at most 128 characters")
    return user


def configured_keys(value: Any) -> dict[str, Identity]:
    """FUNES_API_KEYS: {key: user} or {key: {"user": U, "operator": true}}, by key hash."""
    if not isinstance(value, dict):
        raise ValueError("API_KEYS must be a JSON object of {key: user} or {key: {\"user\": ..., \"operator\": ...}}")
    out = {}
    for key, who in value.items():
        if len(key) < 16:
            raise ValueError("API_KEYS: every key must be at least 16 characters long")
        who = who if isinstance(who, dict) else {"user": who}
        out[key_hash(key)] = Identity(check_user(who.get("user")), bool(who.get("operator", False)))
    return out


class KeyStore:
    """The keys table, plus the keys the settings name (which cannot be revoked from here)."""

    def __init__(self, db: Database, configured: dict[str, Identity] | None = None):
        self.db, self.configured = db, configured or {}

    def add(self, user: str, operator: bool = False) -> tuple[str, dict[str, Any]]:
        """A new key for `user`: the key itself (shown once) and its row."""
        key = KEY_PREFIX + secrets.token_urlsafe(24)
        row = {"key_hash": key_hash(key), "prefix": key[:12], "user_id": check_user(user), "operator": operator,
               "created_at": datetime.now(timezone.utc), "revoked_at": None}
        with self.db.transaction() as conn:
            row["id"] = conn.execute(insert(api_keys).values(**row)).inserted_primary_key[0]
        return key, _public(row)

    def revoke(self, key_id: int) -> dict[str, Any]:
        with self.db.transaction() as conn:
            done = conn.execute(update(api_keys).where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                                .values(revoked_at=datetime.now(timezone.utc))).rowcount
        if not done:
            raise NotFound(f"no active key {key_id}")
        return next(k for k in self.list() if k["id"] == key_id)

    def list(self) -> list[dict[str, Any]]:
        with self.db.reading() as conn:
            rows = conn.execute(select(api_keys).order_by(api_keys.c.id)).mappings().all()
        return [_public(r) for r in rows]

    def any(self) -> bool:
        """Whether any key is in force: then every caller must present one."""
        if self.configured:
            return True
        active = select(api_keys.c.id).where(api_keys.c.revoked_at.is_(None)).limit(1)
        with self.db.reading() as conn:
            return conn.execute(active).first() is not None

    def identify(self, key: str) -> Identity | None:
        """The identity a presented key names, or None for an unknown or revoked key."""
        digest = key_hash(key)
        if digest in self.configured:
            return self.configured[digest]
        with self.db.reading() as conn:
            row = conn.execute(select(api_keys.c.user_id, api_keys.c.operator)
                               .where(api_keys.c.key_hash == digest, api_keys.c.revoked_at.is_(None))).first()
        return Identity(row.user_id, bool(row.operator)) if row else None


def _public(row) -> dict[str, Any]:
    """A key's row without its hash."""
    out = {k: v for k, v in dict(row).items() if k != "key_hash"}
    for k in ("created_at", "revoked_at"):
        if out.get(k) is not None:
            out[k] = out[k].replace(tzinfo=out[k].tzinfo or timezone.utc).isoformat()
    return out
