"""The enrichment prompt and the JSON Schema that constrains the model's answer.

Only a card's name, description and parameters go in: never a pack's written examples, never eval data.
Bump PROMPT_VERSION whenever the prompt or the schema changes, so cached results are not reused.
"""
from __future__ import annotations

import hashlib
import json

from funes.tools.names import humanize
from funes.tools.registry import Tool

PROMPT_VERSION = 2

# (field, how many, what to write): the order the model writes them in.
KINDS = (
    ("direct", 3, "plain requests that need the tool, with realistic values"),
    ("indirect", 4, "requests that describe the user's situation or goal, without the words of the tool's name"),
    ("terse", 3, "requests of two to four words"),
    ("long", 1, "a request of two sentences that first gives some context"),
    ("spanish", 2, "requests in Spanish"),
    ("vietnamese", 2, "requests in Vietnamese"),
    ("hinglish", 2, "requests in Hindi written with Latin letters"),
    ("followup", 2, "follow-ups sent right after the tool's answer, changing one detail"),
    ("no_tool", 6, "questions on the same topic that need no tool, answered from general knowledge: how "
                   "things work, definitions, history, advice; never the user's own data, never a live value"),
    ("keywords", 5, "single words that point to this tool"),
)
EXAMPLE_KINDS = tuple(k for k, _, _ in KINDS if k not in ("no_tool", "keywords"))
MAX_CHARS = 160  # per message: a runaway sentence costs seconds and teaches nothing

SYSTEM = ("You write realistic messages that users send to a chat assistant, for a given tool. "
          "Messages are short (under 15 words, except the long one), written as the user, all different, "
          "with varied wording and values. You answer with one compact JSON object.")

# Worked answers for tools unlike any built-in pack or evaluation set: a lookup of the user's own things,
# an action, and a record. They show the style, and they sit in the prompt's shared prefix, so llama.cpp
# reuses its KV cache from one card to the next.
SHOTS = (
    ("name: track_package (track package)\ndescription: Where a parcel is and when it will arrive.\n"
     "argument tracking_number: string, the carrier's tracking number\n"
     "argument carrier: string (one of: ups, fedex, dhl, usps)", {
        "direct": ["Where is my package 1Z999AA10123456784?", "Track my DHL parcel JD0146000062",
                   "Has my UPS order shipped yet?"],
        "indirect": ["My headphones were due yesterday, what happened?", "When will the courier get here?",
                     "Is the box from my mom still stuck somewhere?",
                     "I need the charger before Friday, will it make it?"],
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
        "keywords": ["track", "parcel", "package", "shipment", "courier"]}),
    ("name: book_table (book table)\ndescription: Reserve a table at a restaurant for a number of people.\n"
     "argument restaurant: string, the restaurant's name\nargument party_size: integer\n"
     "argument time: string, date and time of the booking", {
        "direct": ["Book a table for 4 at Nopa tonight at 8", "Reserve Sakura Sushi for two on Saturday at 7pm",
                   "Get me a table at Chez Marie tomorrow for lunch"],
        "indirect": ["It's our anniversary Friday, can you sort out dinner at Luca's?",
                     "My parents land at six, we'll want somewhere to eat at 8, six of us",
                     "Make sure we have seats at the taco place after the game",
                     "I promised the team a lunch out on Thursday, 12 people"],
        "terse": ["table for two", "dinner reservation 7pm", "book Nopa"],
        "long": ["My sister is visiting this weekend and she loves Thai food. "
                 "Could you reserve a table for three at Kin Khao on Sunday evening?"],
        "spanish": ["Reserva una mesa para cuatro esta noche", "¿Puedes reservar en Casa Lucio el sábado?"],
        "vietnamese": ["Đặt bàn cho hai người lúc 7 giờ tối nay", "Giữ giúp tôi một bàn ở nhà hàng Phở 24"],
        "hinglish": ["do logon ke liye table book kar do", "kal raat 8 baje ka reservation chahiye"],
        "followup": ["make it 8:30 instead", "actually for five people"],
        "no_tool": ["How much should I tip at a restaurant?", "What is the difference between bistro and brasserie?",
                    "Why do restaurants charge a corkage fee?", "What wine goes well with salmon?",
                    "Is it rude to cancel a reservation last minute?", "How did the Michelin guide start?"],
        "keywords": ["reserve", "reservation", "table", "booking", "restaurant"]}),
    ("name: log_workout (log workout)\ndescription: Save an exercise session to the user's fitness diary.\n"
     "argument activity: string, e.g. running, yoga, weights\nargument minutes: integer\n"
     "argument distance_km: number (optional)", {
        "direct": ["Log a 30 minute run", "Add 45 minutes of yoga to my diary", "Record 5 km cycling today"],
        "indirect": ["Just got back from the gym, an hour of weights",
                     "Swam twenty laps this morning, put it down", "Walked the dog for 40 minutes, does that count?",
                     "Finished my first 10k today!"],
        "terse": ["log run", "add workout", "yoga 20 min"],
        "long": ["I skipped the gym all week but finally went this evening. "
                 "Please save 50 minutes of strength training for today."],
        "spanish": ["Registra una carrera de 5 km", "Anota 30 minutos de natación"],
        "vietnamese": ["Ghi lại buổi chạy bộ 30 phút", "Thêm 1 giờ tập gym hôm nay"],
        "hinglish": ["aaj ka 5 km run log kar do", "45 minute yoga add karna hai"],
        "followup": ["make that 50 minutes", "and yesterday's swim too"],
        "no_tool": ["How many calories does running burn?", "Is it better to stretch before or after exercise?",
                    "What is a good resting heart rate?", "Why do muscles get sore after a workout?",
                    "How often should a beginner lift weights?", "Who ran the first marathon?"],
        "keywords": ["workout", "exercise", "log", "fitness", "training"]}),
)


def shot_texts() -> list[str]:
    """Every text of the worked answers: a generated text equal to one of them is an echo."""
    return [t for _, answer in SHOTS for kind in answer.values() for t in kind]


def shot_heads() -> list[str]:
    """The worked tools' descriptions: a generated example nearer to one of them copies the shot."""
    heads = []
    for card, _ in SHOTS:
        name, description = card.split("\n")[:2]
        heads.append(f"{humanize(name.split()[1])}: {description.removeprefix('description: ')}")
    return heads


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
    """The chat messages that ask for one tool's texts: the worked examples first, the card last."""
    shots = []
    for card, answer in SHOTS:
        shots += [{"role": "user", "content": _ask(card)},
                  {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False, separators=(",", ":"))}]
    return [{"role": "system", "content": SYSTEM}, *shots, {"role": "user", "content": _ask(describe(tool))}]


def card_hash(tool: Tool) -> str:
    """What enrichment reads of a card, canonically: the same card always hashes the same."""
    seen = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return hashlib.sha256(json.dumps(seen, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
