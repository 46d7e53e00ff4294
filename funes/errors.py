"""Funes errors, each with the HTTP status it maps to.

FunesError (500)
 ├── BadRequest (400)          malformed input from a caller
 │    └── RegistryError (400)  a tool card or tools file that cannot be loaded (names file and line)
 ├── TooLarge (413)            a request whose size passes a limit before any work starts (names the setting)
 ├── Unauthorized (401)        no API key, or an unknown one, while keys are in force
 ├── Forbidden (403)           a key whose user may not do this (an operator action, another user's id)
 ├── NotFound (404)            an unknown decision, conversation or tool
 ├── ToolNotRunnable (409)     a routable card with no handler was asked to run
 ├── Conflict (409)            a request that contradicts an earlier one (an Idempotency-Key reused)
 ├── ToolError (500)           a tool handler failed (returned to the LLM as the tool's result)
 ├── Busy (503)                every turn slot of this process is taken (MAX_CONCURRENT_TURNS); has Retry-After
 ├── DatabaseUnavailable (503) the database cannot be reached or written (funes.store.db translates its errors)
 │    └── DiskFull (507)       ...because its disk is full
 └── LLMUnavailable (503)      the LLM backend could not be reached or answered with an error
      └── LLMBadReply (502)    it answered, but not in its protocol's shape (a cut stream, garbage, wrong types)
"""


class FunesError(Exception):
    """Base of every error Funes raises on purpose."""

    status = 500


class BadRequest(FunesError):
    status = 400


class RegistryError(BadRequest):
    """A tool card or tools file is malformed or duplicated."""


class Unauthorized(FunesError):
    status = 401
    headers = {"WWW-Authenticate": 'Basic realm="Funes"'}  # a browser asks; the key goes in the password


class Forbidden(FunesError):
    status = 403


class NotFound(FunesError):
    status = 404


class ToolNotRunnable(FunesError):
    status = 409


class Conflict(FunesError):
    status = 409


class TooLarge(FunesError):
    status = 413


class ToolError(FunesError):
    """A tool handler raised, timed out or got arguments it cannot use."""


class Busy(FunesError):
    """No turn slot is free: refused at once, never queued, so a thread stays free for health checks."""

    status = 503

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after_s)}


class DatabaseUnavailable(FunesError):
    """The database failed (down, unreachable, unwritable); the message names the part, not its address."""

    status = 503


class DiskFull(DatabaseUnavailable):
    status = 507


class LLMUnavailable(FunesError):
    """The LLM backend is unreachable or failed; the decision is still logged."""

    status = 503


class LLMBadReply(LLMUnavailable):
    """The LLM backend answered something its protocol does not allow: nothing of it is kept as a reply."""

    status = 502
