"""The metric selectors in a PromQL expression, with the label names each one is queried by.

Enough of PromQL for the product's own rules, dashboards and alerts: a tokenizer and a walk over
it, not a full parser. A selector's labels are its matchers' names plus every label list of an
aggregation (`by`, `without`) over it and of a vector match (`on`, `ignoring`, `group_left`,
`group_right`) around it, so a label that an outer expression groups by is checked against the
metric too: a superset of what must exist, never fewer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+)
  | (?P<number>(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[{}()\[\],=<>+\-*/%^@:])
    """,
    re.VERBOSE,
)
_OPEN = {"(": ")", "{": "}", "[": "]"}
_MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})
AGGREGATIONS = frozenset({
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
    "topk", "quantile", "limitk", "limit_ratio",
})  # fmt: skip
LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = (
    AGGREGATIONS
    | LABEL_LIST_KEYWORDS
    | frozenset({"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan", "start", "end"})
)


class PromQLError(ValueError):
    """An expression this reader cannot tokenize or balance."""


@dataclass(frozen=True)
class Selector:
    name: str
    labels: frozenset[str]


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def tokenize(expr: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise PromQLError(f"cannot read {expr[pos : pos + 20]!r} in {expr!r}")
        pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append(_Token(kind, match.group()))
    return tokens


def _partners(tokens: list[_Token], expr: str) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing one."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for i, token in enumerate(tokens):
        if token.kind != "op":
            continue
        if token.text in _OPEN:
            stack.append(i)
        elif token.text in _OPEN.values():
            if not stack or _OPEN[tokens[stack[-1]].text] != token.text:
                raise PromQLError(f"unbalanced {token.text!r} in {expr!r}")
            pairs[stack.pop()] = i
    if stack:
        raise PromQLError(f"unclosed {tokens[stack[-1]].text!r} in {expr!r}")
    return pairs


def _matcher_labels(tokens: list[_Token], start: int, end: int) -> tuple[set[str], str | None]:
    """Label names in `{...}` (exclusive bounds) and the __name__ it selects, if any."""
    labels: set[str] = set()
    name = None
    i = start
    while i < end:
        token = tokens[i]
        op = tokens[i + 1].text if i + 1 < end else ""
        if token.kind in ("ident", "string") and op in _MATCH_OPS and i + 2 < end:
            label = token.text.strip("\"'`")
            if label == "__name__" and tokens[i + 1].text == "=":
                name = tokens[i + 2].text.strip("\"'`")
            else:
                labels.add(label)
            i += 3
            continue
        i += 1
    return labels, name


def selectors(expr: str) -> list[Selector]:
    """Every metric selector in `expr`, in order, with the label names it is queried by."""
    tokens = tokenize(expr)
    pairs = _partners(tokens, expr)
    closing = {close: open_ for open_, close in pairs.items()}
    found: list[tuple[int, str, set[str]]] = []  # token index, name, labels
    label_lists: list[tuple[int, int, set[str]]] = []  # span [start, end] the labels apply to
    skip_until = -1
    for i, token in enumerate(tokens):
        if i <= skip_until:
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if token.kind == "ident" and token.text in LABEL_LIST_KEYWORDS:
            if nxt is None or nxt.text != "(":
                continue  # group_left without a list
            end = pairs[i + 1]
            names = {t.text.strip("\"'`") for t in tokens[i + 2 : end] if t.kind != "op"}
            label_lists.append((*_label_scope(tokens, pairs, closing, i, end), names))
            skip_until = end
        elif token.kind == "ident" and token.text not in KEYWORDS:
            if nxt is not None and nxt.text == "(":
                continue  # a function call
            labels: set[str] = set()
            if nxt is not None and nxt.text == "{":
                labels, _ = _matcher_labels(tokens, i + 2, pairs[i + 1])
                skip_until = pairs[i + 1]
            found.append((i, token.text, labels))
        elif token.text == "{":
            labels, name = _matcher_labels(tokens, i + 1, pairs[i])
            if name is None:
                raise PromQLError(f"a selector without a metric name in {expr!r}")
            found.append((i, name, labels))
            skip_until = pairs[i]
        elif token.text == "[":
            skip_until = pairs[i]  # a range or subquery: durations and Grafana variables
    out = []
    for index, name, labels in found:
        extra = {n for start, end, names in label_lists if start <= index <= end for n in names}
        out.append(Selector(name, frozenset(labels | extra)))
    return out


def _label_scope(
    tokens: list[_Token], pairs: dict[int, int], closing: dict[int, int], keyword: int, end: int
) -> tuple[int, int]:
    """The token span a label list applies to.

    `agg by (l) (expr)` and `agg (expr) by (l)`: the aggregation's argument. `a on (l) b` and
    the group modifiers: the innermost bracket pair around the keyword (both operands), or all.
    """
    if tokens[keyword].text in ("by", "without"):
        after = end + 1
        if after < len(tokens) and tokens[after].text == "(":
            return after, pairs[after]
        before = keyword - 1
        if before >= 0 and before in closing:
            return closing[before], before
        raise PromQLError(f"`{tokens[keyword].text}` without an aggregation argument")
    enclosing = [(o, c) for o, c in pairs.items() if o < keyword < c and tokens[o].text == "("]
    if not enclosing:
        return 0, len(tokens)
    return max(enclosing)
