"""Degenerate outputs: one repetition measure per request, against a threshold.

The measure is seq-rep-4 (Welleck et al. 2019, "Neural Text Degeneration with Unlikelihood
Training", the measure that work and its successors report for looping output): the share of a
continuation's 4-grams that repeat a 4-gram seen earlier in it, 1 - unique / total. Why this one:
it reads the output alone (no reference text), it is 0 for text without repeats and tends to 1 for
a loop of any period up to the length, and it is known across the degeneration literature, where
human text scores near 0.01 and greedy loops near 0.5 or above. Compression ratio was the other
candidate; it also rises on ordinary code and on short texts, which this measure does not.

Tokens are words (runs of letters and digits) and single punctuation marks, with each CJK
character a token of its own, so text in a language written without spaces is measured too: the
bench has the server's text, not its token ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

N = 4
THRESHOLD = 0.5
"""seq-rep-4 above which a request is degenerate: well above natural text, code included
(repeated keywords and boilerplate stay below 0.3), well below a loop (near 1)."""
MIN_TOKENS = 16
"""Shorter outputs are not judged: too few 4-grams for a share to mean anything."""
REFUSE_SHARE = 0.1
"""`specserve tune` refuses to rank a point when more than this share of its measured requests
degenerated (a few looping answers are a model's; a tenth is the configuration's)."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}\W]+|[^\w\s]", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def seq_rep(words: Sequence[str], n: int = N) -> float | None:
    """1 - |unique n-grams| / |n-grams|; None when `words` is too short to judge."""
    if len(words) < max(n, MIN_TOKENS):
        return None
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams)


def repetition(text: str) -> float | None:
    """seq-rep-4 of one output."""
    return seq_rep(tokens(text))


def is_degenerate(score: float | None, threshold: float = THRESHOLD) -> bool:
    return score is not None and score > threshold
