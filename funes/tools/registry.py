"""Tool cards and the registry that holds them.

A card is everything the router needs to know about a tool (name, description, JSON-Schema
parameters, pack, example utterances, negatives, keyword patterns, own threshold); a handler is
optional, so a card sent by a client is routable even though it cannot run here.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from funes.errors import RegistryError, ToolNotRunnable
from funes.tools.formats import as_card
from funes.tools.names import check_name

CARD_FIELDS = ("name", "description", "parameters", "pack", "examples", "negatives", "keywords",
               "requires", "ends_turn", "threshold", "id")
GENERATED_LISTS = ("examples", "negatives", "keywords")


LABELS = "labels"  # the `model` of generated texts that are only people's labels: the card itself is still bare
MAX_NAME = 128  # characters in a tool name


@dataclass(frozen=True)
class Generated:
    """Texts a model wrote for a card from its name, description and parameters (see funes.cards)."""

    examples: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()  # plain words or phrases, matched whole-word
    model: str = ""
    prompt: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"examples": list(self.examples), "negatives": list(self.negatives),
                "keywords": list(self.keywords), "model": self.model, "prompt": self.prompt}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    pack: str = "custom"
    examples: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # tools whose output this one consumes, handed along on a first turn
    ends_turn: bool = False         # its call is the final answer (the ReAct "respond" pattern)
    threshold: float | None = None
    id: str | None = None
    handler: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    cache_ttl: float | None = None  # seconds a result may be reused for the same arguments; None = never
    generated: Generated | None = None  # texts a model wrote for this card, kept apart from written ones
    source: str = field(default="", compare=False)  # where it came from: pack:x, file:path, module:m, plugin:d, request

    @property
    def key(self) -> str:
        """Unique key in a registry: the id where names repeat (pooled BFCL), else the name."""
        return self.id or self.name

    @property
    def runnable(self) -> bool:
        return self.handler is not None

    @property
    def bare(self) -> bool:
        """Only a name, a description and a schema: nothing written or generated to route by."""
        return not self.examples and self.generated is None

    @property
    def all_examples(self) -> tuple[str, ...]:
        """Written examples, then generated ones: what the router learns from."""
        return self.examples + (self.generated.examples if self.generated else ())

    @property
    def all_negatives(self) -> tuple[str, ...]:
        return self.negatives + (self.generated.negatives if self.generated else ())

    def run(self, **arguments: Any) -> Any:
        """Run the handler; a card without one says so instead of pretending."""
        if self.handler is None:
            raise ToolNotRunnable(self.no_runner())
        return self.handler(**arguments)

    def no_runner(self) -> str:
        """Why this card cannot run here, and what to do about it, in words a user can act on."""
        came = f" it came from {self.source};" if self.source else ""
        return (f"{self.name} is routable but has no handler in this server:{came} serve it from Python with "
                "FUNES_TOOL_MODULES, or call it from your client through /route or the proxy")

    def schema(self) -> dict[str, Any]:
        """The OpenAI/Ollama function-calling form of this card."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def to_dict(self) -> dict[str, Any]:
        """The card as JSON (no handler)."""
        data = {k: getattr(self, k) for k in CARD_FIELDS}
        data.update(examples=list(self.examples), negatives=list(self.negatives), keywords=list(self.keywords),
                    requires=list(self.requires), runnable=self.runnable, source=self.source)
        if self.generated is not None:
            data["generated"] = self.generated.to_dict()
        return {k: v for k, v in data.items() if v is not None}


def card_from_dict(data: Any, where: str, source: str = "") -> Tool:
    """Build a Tool from a Funes card, an OpenAI/Ollama tool or an MCP tool, naming `where` (file:line) in errors."""
    data = as_card(data, where)
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: a tool card must be a JSON object")
    unknown = set(data) - set(CARD_FIELDS) - {"runnable", "generated", "source"}  # runnable, source: what to_dict adds
    if unknown:
        raise RegistryError(f"{where}: unknown card field(s): {', '.join(sorted(unknown))}")
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not name.strip():
        raise RegistryError(f"{where}: card needs a non-empty string 'name'")
    if len(name) > MAX_NAME:  # MCP's limit; a name is sent to the model with every call
        raise RegistryError(f"{where}: card {name[:40]!r}…: 'name' is longer than {MAX_NAME} characters")
    check_name(name, where)
    if not isinstance(data.get("pack", ""), str):
        raise RegistryError(f"{where}: card {name!r}: 'pack' must be a string")
    if not isinstance(description, str):
        raise RegistryError(f"{where}: card {name!r} needs a string 'description'")
    params = data.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict) or params.get("type", "object") != "object":
        raise RegistryError(f"{where}: card {name!r}: 'parameters' must be a JSON Schema object with "
                            "\"type\": \"object\" (a tool's arguments are named)")
    # a broken schema found here names its file and line; found at call time it only fails the call
    if problem := schema_problem(json.dumps(params, sort_keys=True, default=str)):
        raise RegistryError(f"{where}: card {name!r}: invalid JSON Schema at {problem}")
    lists = {}
    for key in ("examples", "negatives", "keywords", "requires"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise RegistryError(f"{where}: card {name!r}: '{key}' must be a list of non-empty strings")
        lists[key] = tuple(value)
    if not isinstance(data.get("ends_turn", False), bool):
        raise RegistryError(f"{where}: card {name!r}: 'ends_turn' must be true or false")
    threshold = data.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not math.isfinite(threshold)):
        raise RegistryError(f"{where}: card {name!r}: 'threshold' must be a finite number")
    if data.get("id") is not None and (isinstance(data["id"], bool) or not isinstance(data["id"], (str, int))):
        raise RegistryError(f"{where}: card {name!r}: 'id' must be a string or an integer")
    return Tool(name=name, description=description, parameters=params,
                pack=str(data.get("pack", "custom")), threshold=threshold, id=data.get("id"),
                ends_turn=data.get("ends_turn", False), generated=_generated(data.get("generated"), name, where),
                source=source, **lists)


def _generated(data: Any, name: str, where: str) -> Generated | None:
    """The card's `generated` block, checked like the written lists."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: card {name!r}: 'generated' must be an object")
    lists = {}
    for key in GENERATED_LISTS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{where}: card {name!r}: 'generated.{key}' must be a list of strings")
        lists[key] = tuple(value)
    prompt = data.get("prompt", 0)
    if not isinstance(data.get("model", ""), str) or not isinstance(prompt, int):
        raise RegistryError(f"{where}: card {name!r}: 'generated.model' must be a string, 'generated.prompt' a number")
    return Generated(model=data.get("model", ""), prompt=prompt, **lists)


class Registry:
    """An ordered set of tool cards, unique by key."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool, where: str = "") -> None:
        """Add a card; a second card with the same key is an error."""
        if tool.key in self._tools:
            place, first = f"{where}: " if where else "", self._tools[tool.key].source
            apart = first and tool.source and first != tool.source
            both = f": {tool.source} and {first} both define it" if apart else ""
            raise RegistryError(f"{place}duplicate tool {tool.key!r}{both}")
        self._tools[tool.key] = tool

    def bind(self, name: str, handler: Callable[..., Any], cache_ttl: float | None = None) -> None:
        """Attach a handler (and how long its results keep) to the card called `name`."""
        if name not in self._tools:
            raise RegistryError(f"handler for unknown tool {name!r}")
        self._tools[name] = dataclasses.replace(self._tools[name], handler=handler, cache_ttl=cache_ttl)

    def with_examples(self, extra: dict[str, list[str]], negatives: dict[str, list[str]] | None = None) -> Registry:
        """A copy whose cards gain more example utterances and negatives, by tool name (labelled traffic, say)."""
        negatives = negatives or {}
        return Registry(dataclasses.replace(t, examples=t.examples + tuple(extra.get(t.name, ())),
                                            negatives=t.negatives + tuple(negatives.get(t.name, ()))) for t in self)

    def hash(self) -> str:
        """The cards' content (not handlers), canonically: labels and caches attach to it."""
        cards = [t.to_dict() | {"runnable": None, "source": None} for t in self]
        return hashlib.sha256(json.dumps(cards, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> Tool | None:
        return self._tools.get(key)

    def __getitem__(self, key: str) -> Tool:
        return self._tools[key]

    def __contains__(self, key: object) -> bool:
        return key in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self]

    def check_requires(self, where: str = "") -> None:
        """RegistryError naming the first card whose `requires` names a tool this registry lacks."""
        names = set(self.names)
        for tool in self:
            unknown = [r for r in tool.requires if r not in names]
            if unknown:
                place = f"{where}: " if where else ""
                raise RegistryError(f"{place}card {tool.name!r}: 'requires' names {unknown[0]!r}, which is not "
                                    "a tool here (a card may require only tools routed beside it)")


@functools.lru_cache(maxsize=4096)
def schema_problem(schema: str) -> str | None:
    """Where and why a parameters schema (as canonical JSON text) is not JSON Schema, or None; checked once per
    text: the meta-schema check is slow (seconds over 10,000 cards), and tools often share one (no parameters)."""
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(schema))
    except jsonschema.SchemaError as e:
        return f"{'/'.join(str(p) for p in e.absolute_path) or 'parameters'}: {e.message}"
    return None

