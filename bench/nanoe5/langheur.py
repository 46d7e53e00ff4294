"""A dependency-free 'does this message look non-English' heuristic (fixed a priori, not fitted to the eval sets).

Non-English when the message has a non-ASCII letter (accents, other scripts), or when it has at least three
words and fewer than 20% of them are common English words (catches romanised Hindi, unaccented Spanish or
Vietnamese). Names like 'Zürich' in an English message are a known false positive.
"""
from __future__ import annotations

import re

_EN = set("""
a an the i me my mine myself we our ours us you your yours he him his she her it its they them their this that
these those is am are was were be been being do does did done doing have has had having will would can could
should shall may might must to of in on at for from with by about as into over after before under between
through during up down out off than then so and or but not no nor if because while until what which who whom
whose when where why how all any each every some more most much many few other another such own same very too
just also only again now today tonight tomorrow yesterday week weeks month months year years day days last next
ago please thanks thank ok okay yes hi hello hey there here get got give tell show find list send set make book
add remove delete create open check search look see know want need like let go going help use run play stop start
turn switch put take keep remind call write read note notes new old good best time times morning evening night
hour hours minute minutes one two three first second many much money spent spend spending pay paid buy bought
""".split())
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def looks_non_english(text: str) -> bool:
    words = _WORD.findall(text)
    if any(ord(ch) > 127 for w in words for ch in w):
        return True
    words = [w.lower() for w in words]
    if len(words) < 3:
        return False
    return sum(w in _EN for w in words) / len(words) < 0.2
