"""A message that only thanks, praises or says goodbye ("perfect, thank you", "gracias, eso es todo", "cảm ơn nhé").

After a tool's answer such a message is scored with the previous turn like a follow-up ("and in April?"), and the
classifier's no-tool class is seldom sure enough to veto it (P(no tool) 0.16 to 0.80 for ten such messages over
five registries here, mostly under NONE_VETO's 0.6), so it selected the previous tool again: a "thanks" re-ran the analysis. A closing selects
no tool at all.
"""
from __future__ import annotations

import unicodedata

import regex

# Words or phrases that thank or close a conversation (English, Spanish, Vietnamese, Hinglish), accents folded.
_THANKS = regex.compile(
    r"\b(?:thanks?|thank\s+you|thx|thnx|thanx|ty|tysm|cheers|bye|goodbye|bye\s+bye|see\s+(?:you|ya)|good\s+night|"
    r"that'?s\s+(?:all|it|everything)|that\s+is\s+all|that\s+will\s+be\s+all|nothing\s+else|gracias|adios|"
    r"eso\s+es\s+todo|es\s+todo|hasta\s+luego|cam\s+on|tam\s+biet|vay\s+la\s+du(?:\s+roi)?|the\s+thoi|"
    r"shukriya|dhanyavad|dhanyawad|bas\s+itna(?:\s+hi)?|"
    # praise that closes a turn; never a bare "ok", "sure" or "sounds good", which may say "go ahead"
    r"that\s+help(?:s|ed)|nice\s+one|(?:good|great)\s+job|well\s+done|got\s+it|makes\s+sense)\b")
# Words that may stand beside a thanks without asking for anything: praise, fillers, address.
_FILLER = frozenset(
    "ok okay k kk cool great perfect awesome nice good super lovely brilliant excellent amazing fine alright right "
    "so much very a lot you u all that it is was for now the your help helpful really again man bro buddy mate sir "
    "oh ah wow yay haha lol phew yikes got i appreciate appreciated have day today later then and too just exactly "
    "what wanted needed are r best relief that's thats "
    "muchas muy bien bueno perfecto genial vale por hoy todo amigo nhe nha ban nhieu roi ha vay "
    "yaar bhai ji bahut theek thik hai accha acha badhiya".split())
_WORD = regex.compile(r"[\p{L}']+")
MAX_WORDS = 10  # a closing is short; a longer message that thanks also says something else


def _fold(text: str) -> str:
    """Lower case without accents ("cảm ơn" -> "cam on"), so one pattern covers text typed either way."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().replace("đ", "d").replace("’", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def is_closing(message: str) -> bool:
    """True when the message thanks, praises or says goodbye and asks for nothing else."""
    text = _fold(message)
    if len(_WORD.findall(text)) > MAX_WORDS or not _THANKS.search(text):
        return False
    rest = _WORD.findall(_THANKS.sub(" ", text))
    return all(word.strip("'") in _FILLER for word in rest)
