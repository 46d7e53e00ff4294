"""Conversations and their messages: the short-term memory kept server-side."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

from sqlalchemy import insert, select

from funes.store.db import Connection, Database, conversations, messages
from funes.errors import NotFound


class ConversationStore:
    """Create conversations, read their recent turns, append a turn inside a caller's transaction."""

    def __init__(self, db: Database):
        self.db = db

    def owner(self, conversation_id: str) -> str:
        """The user a conversation belongs to; NotFound for an unknown id."""
        with self.db.reading() as conn:
            user = conn.execute(select(conversations.c.user_id)
                                .where(conversations.c.id == conversation_id)).scalar_one_or_none()
        if user is None:
            raise NotFound(f"no conversation {conversation_id!r}")
        return user

    def recent(self, conversation_id: str | None, limit: int) -> list[dict[str, str]]:
        """The last `limit` user/assistant messages, oldest first."""
        if not conversation_id or limit <= 0:
            return []
        stmt = (select(messages.c.role, messages.c.content).where(messages.c.conversation_id == conversation_id)
                .order_by(messages.c.id.desc()).limit(limit))
        with self.db.reading() as conn:
            rows = conn.execute(stmt).all()
        return [{"role": r.role, "content": r.content} for r in reversed(rows)]

    def append_turn(self, conn: Connection, conversation_id: str | None, user_id: str, message: str, reply: str,
                    decision_id: int | None, new: bool = False) -> str:
        """Write the user message and the reply (creating the conversation when `new`); returns its id."""
        now = datetime.now(timezone.utc)
        if conversation_id is None:
            conversation_id, new = uuid.uuid4().hex, True
        if new:
            conn.execute(insert(conversations).values(id=conversation_id, user_id=user_id, created_at=now))
        conn.execute(insert(messages), [
            {"conversation_id": conversation_id, "role": "user", "content": message, "decision_id": decision_id,
             "created_at": now},
            {"conversation_id": conversation_id, "role": "assistant", "content": reply, "decision_id": decision_id,
             "created_at": now},
        ])
        return conversation_id
