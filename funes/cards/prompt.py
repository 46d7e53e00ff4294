"""The enrichment prompt and the JSON Schema that constrains the model's answer.

Only a card's name, description and parameters go in: never a pack's written examples, never eval data.
Bump PROMPT_VERSION whenever the prompt or the schema changes, so cached results are not reused.
"""
from __future__ import annotations

import hashlib
import json

from funes.tools.names import humanize
from funes.tools.registry import Tool

PROMPT_VERSION = 1

# (field, how many, what to write): the order the model writes them in.
KINDS = (
    ("direct", 3, "plain requests that need the tool, with realistic values"),
    ("indirect", 3, "requests that need the tool without using the words of its name"),
    ("terse", 3, "requests of two to four words"),
    ("long", 1, "a request of two sentences that first gives some context"),
    ("spanish", 2, "requests in Spanish"),
    ("vietnamese", 2, "requests in Vietnamese"),
    ("hinglish", 2, "requests in Hindi written with Latin letters"),
    ("followup", 2, "follow-ups sent right after the tool's answer, changing one detail"),
    ("no_tool", 6, "questions on the same topic that the tool cannot answer and that need no tool: "
                   "general knowledge, explanations, advice"),
    ("keywords", 5, "single words that point to this tool"),
)
EXAMPLE_KINDS = tuple(k for k, _, _ in KINDS if k not in ("no_tool", "keywords"))
MAX_CHARS = 160  # per message: a runaway sentence costs seconds and teaches nothing

SYSTEM = ("You write realistic messages that users send to a chat assistant, for a given tool. "
          "Messages are short (under 15 words, except the long one), written as the user, all different. "
          "You answer with one compact JSON object.")

# One worked answer for a tool unlike any built-in pack: it shows the style, and it sits in the prompt's
# shared prefix, so llama.cpp reuses its KV cache from one card to the next.
SHOT_TOOL = ("name: track_package (track package)\ndescription: Where a parcel is and when it will arrive.\n"
             "argument tracking_number: string, the carrier's tracking number\n"
             "argument carrier: string (one of: ups, fedex, dhl, usps)")
SHOT_ANSWER = {
    "direct": ["Where is my package 1Z999AA10123456784?", "Track my DHL parcel JD0146000062",
               "Has my UPS order shipped yet?"],
    "indirect": ["My headphones were due yesterday, what happened?", "When will the courier get here?",
                 "Is the box from my mom still stuck somewhere?"],
    "terse": ["track parcel", "package status", "where's my order"],
    "long": ["I sent a birthday gift to my sister last week and she still has not got it. "
             "Can you check where FedEx shipment 449044304137 is now?"],
    "spanish": ["¿Dónde está mi paquete?", "Rastrea mi envío de DHL JD0146000062"],
    "vietnamese": ["Đơn hàng của tôi đang ở đâu?", "Kiểm tra giúp tôi mã vận đơn 8812345"],
    "hinglish": ["mera parcel kab tak aayega?", "DHL wala package track karo na"],
    "followup": ["and the other one?", "what about the FedEx one?"],
    "no_tool": ["How does international shipping work?", "Why do parcels get held at customs?",
                "What is the cheapest way to mail a letter abroad?", "Who invented the barcode?",
                "Should I tip a delivery driver?", "How long does shipping from China usually take?"],
    "keywords": ["track", "parcel", "package", "shipment", "courier"],
}


def schema() -> dict:
    """The answer's JSON Schema: one array per kind, of exactly its count of short strings."""
    def strings(n: int) -> dict:
        return {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": MAX_CHARS},
                "minItems": n, "maxItems": n}
    return {"type": "object", "properties": {k: strings(n) for k, n, _ in KINDS},
            "required": [k for k, _, _ in KINDS], "additionalProperties": False}


def grammar() -> str:
    """The same shape as a llama.cpp GBNF grammar with no whitespace: every token the model spends is text."""
    def array(n: int) -> str:
        return '"[" str' + ' "," str' * (n - 1) + ' "]"'
    fields = ' "," '.join(f'"\\"{k}\\":" {array(n)}' for k, n, _ in KINDS)
    return (f'root ::= "{{" {fields} "}}"\n'
            f'str ::= "\\"" ch{{2,{MAX_CHARS}}} "\\""\n'
            'ch ::= [^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]\n')


def describe(tool: Tool) -> str:
    """The card as the model reads it: name, what it does, its arguments."""
    lines = [f"name: {tool.name} ({humanize(tool.name)})", f"description: {tool.description}"]
    for arg, spec in (tool.parameters.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        detail = ", ".join(str(x) for x in (spec.get("type"), spec.get("description")) if x)
        if spec.get("enum"):
            detail += f" (one of: {', '.join(map(str, spec['enum'][:8]))})"
        lines.append(f"argument {arg}: {detail}".rstrip(": "))
    return "\n".join(lines)


def _ask(card: str) -> str:
    asks = "\n".join(f'- "{k}": {n} {what}.' for k, n, what in KINDS)
    return f"Tool:\n{card}\n\nWrite the messages for these fields:\n{asks}"


def messages(tool: Tool) -> list[dict]:
    """The chat messages that ask for one tool's texts: the worked example first, the card last."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": _ask(SHOT_TOOL)},
            {"role": "assistant", "content": json.dumps(SHOT_ANSWER, ensure_ascii=False, separators=(",", ":"))},
            {"role": "user", "content": _ask(describe(tool))}]


def card_hash(tool: Tool) -> str:
    """What enrichment reads of a card, canonically: the same card always hashes the same."""
    seen = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return hashlib.sha256(json.dumps(seen, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
