"""Forward one request to the upstream server and hand its response back as it comes, stream or not."""
from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator

import httpx

from funes.errors import BadRequest
from funes.proxy.outcome import TAIL_BYTES

log = logging.getLogger(__name__)
# Hop-by-hop headers and those httpx or the WSGI server set again for the hop they make.
# Small requests (a filtered body) go out in one segment: with Nagle on, the body waits for the server's
# delayed ACK of the headers, 40 ms on Linux (measured with bench-proxy).
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
                 "proxy-authorization", "proxy-connection", "te", "trailer"}


class UpstreamDown(Exception):
    """The upstream server could not be reached or stopped answering."""

    decision_id: int | None = None  # the routed request's decision, for the error response's header


class Upstream:
    """An Ollama or OpenAI-compatible server at `base_url`; one connection pool, shared by threads."""

    def __init__(self, base_url: str, timeout: float):
        self.base_url = base_url.rstrip("/")
        # connecting is quick or the server is down; a model may think for minutes before its first byte
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=5.0),
                                  transport=httpx.HTTPTransport(socket_options=NO_DELAY))

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> httpx.Response:
        """The upstream's response, its body not yet read (UpstreamDown when it cannot be reached)."""
        sent = {k: v for k, v in headers.items() if k.lower() not in NOT_FORWARDED}
        request = self._http.build_request(method, self.base_url + path, headers=sent, content=body or None)
        try:
            return self._http.send(request, stream=True)
        except httpx.LocalProtocolError as e:  # the client's own request cannot go out as it is
            raise BadRequest(f"the request cannot be forwarded as it is: {e}") from None
        except httpx.HTTPError as e:
            log.warning("upstream %s %s: %s: %s", method, path, type(e).__name__, e)
            raise UpstreamDown(type(e).__name__) from None

    def close(self) -> None:
        self._http.close()


def body(response: httpx.Response) -> bytes | Iterator[bytes]:
    """A whole answer as one piece, a stream as its pieces arrive; undecoded (the client reads its Content-Encoding)."""
    if "content-length" in response.headers:  # not a stream: one write, no chunk framing to wait on
        return read_whole(response)
    return relay(response, lambda broke, tail: None)


def read_whole(response: httpx.Response) -> bytes:
    """An answer read to its end (a stream's too); UpstreamDown when it breaks off."""
    try:
        return response.read()
    except httpx.HTTPError as e:
        raise UpstreamDown(type(e).__name__) from None
    finally:
        response.close()


def relay(response: httpx.Response, ended: Callable[[str | None, bytes], None]) -> Iterator[bytes]:
    """A stream's pieces as they arrive; then `ended(why it broke off or None, the stream's last bytes)`."""
    tail, broke = b"", None
    try:
        for piece in response.iter_raw():
            tail = (tail + piece)[-TAIL_BYTES:]
            yield piece
    except httpx.HTTPError as e:  # the headers are gone: all a stream can do is end early
        log.warning("upstream stream broke off: %s: %s", type(e).__name__, e)
        broke = f"the stream broke off: {type(e).__name__}"
    finally:
        response.close()
    ended(broke, tail)  # not reached when the client went away (GeneratorExit): nothing was cut upstream


def response_headers(response: httpx.Response) -> list[tuple[str, str]]:
    """The upstream's headers a client should see (Funes' own server sets Date and Server)."""
    return [(k, v) for k, v in response.headers.items() if k.lower() not in NOT_FORWARDED | {"date", "server"}]


def decided(answer: tuple, error: UpstreamDown) -> tuple:
    """An error answer `(body, status)` with the routed request's decision id, where it has one."""
    body, status = answer
    return (body, status, {"X-Funes-Decision-Id": str(error.decision_id)}) if error.decision_id else answer
