"""Display filters over frame records, in the spirit of Wireshark's `-Y`.

    name == "transfer" and fields.settled == false
    fields.reply-code >= 400 or findings
    not (kind == "heartbeat") and src contains ":5672"
    fields.routing-key matches "^orders\\."

Grammar (lowest precedence first):

    expr       := and_expr (("or" | "||") and_expr)*
    and_expr   := not_expr (("and" | "&&") not_expr)*
    not_expr   := ("not" | "!") not_expr | primary
    primary    := "(" expr ")" | path [op value]
    op         := == != < > <= >= contains matches
    value      := "string" | number | true | false | null
    path       := name ("." name | "[" integer "]")*     names may hold hyphens: fields.delivery-id

A path alone is true when the record has it and it is not empty, false, zero or null. A
comparison with a path the record lacks is false (as in Wireshark, `a != 1` needs an `a`).
Filters compile once into closures; a bad one raises `FilterError` with the column it failed at.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Record = dict[str, Any]
Predicate = Callable[[Record], bool]

_MISSING = object()
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w-]))
      | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\)|\[|\]|\.)
      | (?P<word>[A-Za-z_$][\w$]*(?:-[\w$]+)*)
    )""",
    re.VERBOSE,
)
_COMPARISONS = ("==", "!=", "<", ">", "<=", ">=", "contains", "matches")
_KEYWORDS = {"and", "or", "not", "true", "false", "null", "contains", "matches"}


class FilterError(ValueError):
    """A filter that does not parse: `column` is 1-based, for pointing at the problem."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"column {column}: {message}")
        self.column = column


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, column)
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if not match or match.end() == pos:
                col = pos + 1 + (len(text[pos:]) - len(text[pos:].lstrip()))
                raise FilterError(f"unexpected character {text[col - 1]!r}", col)
            kind = match.lastgroup or ""
            value = match.group(kind)
            self.tokens.append((kind, value, match.start(kind) + 1))
            pos = match.end()
        self.tokens.append(("end", "", len(text) + 1))
        self.index = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.index]

    def take(self) -> tuple[str, str, int]:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def is_word(self, *words: str) -> bool:
        kind, value, _ = self.peek()
        return kind in ("word", "op") and value in words

    def parse(self) -> Predicate:
        if self.peek()[0] == "end":
            raise FilterError("empty filter", 1)
        predicate = self.or_expr()
        kind, value, col = self.peek()
        if kind != "end":
            raise FilterError(f"unexpected {value!r}; expected 'and', 'or' or the end", col)
        return predicate

    def or_expr(self) -> Predicate:
        parts = [self.and_expr()]
        while self.is_word("or", "||"):
            self.take()
            parts.append(self.and_expr())
        if len(parts) == 1:
            return parts[0]
        return lambda r: any(p(r) for p in parts)

    def and_expr(self) -> Predicate:
        parts = [self.not_expr()]
        while self.is_word("and", "&&"):
            self.take()
            parts.append(self.not_expr())
        if len(parts) == 1:
            return parts[0]
        return lambda r: all(p(r) for p in parts)

    def not_expr(self) -> Predicate:
        if self.is_word("not", "!"):
            self.take()
            inner = self.not_expr()
            return lambda r: not inner(r)
        return self.primary()

    def primary(self) -> Predicate:
        kind, value, col = self.peek()
        if kind == "op" and value == "(":
            self.take()
            inner = self.or_expr()
            kind, value, col = self.take()
            if value != ")":
                raise FilterError("expected ')'", col)
            return inner
        if kind != "word" or value in _KEYWORDS:
            what = "the end" if kind == "end" else repr(value)
            raise FilterError(f"expected a field name, found {what}", col)
        path = self.path()
        kind, op, col = self.peek()
        if op not in _COMPARISONS or kind not in ("op", "word"):
            return lambda r: _truthy(_lookup(r, path))
        self.take()
        value_col = self.peek()[2]
        return _comparison(path, op, self.value(op), value_col)

    def path(self) -> tuple[str | int, ...]:
        steps: list[str | int] = [self.take()[1]]
        while True:
            kind, value, col = self.peek()
            if value == ".":
                self.take()
                kind, value, col = self.take()
                if kind != "word":
                    raise FilterError("expected a name after '.'", col)
                steps.append(value)
            elif value == "[":
                self.take()
                kind, value, col = self.take()
                if kind != "number" or not value.lstrip("-").isdigit():
                    raise FilterError("expected an integer index", col)
                steps.append(int(value))
                if self.take()[1] != "]":
                    raise FilterError("expected ']'", col + len(value))
            else:
                return tuple(steps)

    def value(self, op: str) -> Any:
        kind, value, col = self.take()
        if kind == "string":
            return _unquote(value)
        if kind == "number":
            return float(value) if any(c in value for c in ".eE") else int(value)
        if kind == "word" and value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        what = "the end" if kind == "end" else repr(value)
        raise FilterError(f"expected a value after {op!r}, found {what}", col)


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _lookup(record: Any, path: tuple[str | int, ...]) -> Any:
    value = record
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return _MISSING
            value = value[step]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            return _MISSING
    return value


def _truthy(value: Any) -> bool:
    return value is not _MISSING and value not in (None, False, 0, "", [], {})


def _comparison(path: tuple[str | int, ...], op: str, expected: Any, col: int) -> Predicate:
    if op == "matches":
        if not isinstance(expected, str):
            raise FilterError("'matches' needs a quoted regular expression", col)
        try:
            pattern = re.compile(expected)
        except re.error as exc:
            raise FilterError(f"bad regular expression: {exc}", col) from None

        def matches(r: Record) -> bool:
            value = _lookup(r, path)
            return isinstance(value, str) and pattern.search(value) is not None

        return matches
    if op == "contains":

        def contains(r: Record) -> bool:
            value = _lookup(r, path)
            if isinstance(value, str):
                return isinstance(expected, str) and expected in value
            if isinstance(value, (list, dict)):
                return expected in value
            return False

        return contains

    def compare(r: Record) -> bool:
        value = _lookup(r, path)
        if value is _MISSING:
            return False
        if op == "==":
            return _same(value, expected)
        if op == "!=":
            return not _same(value, expected)
        if not _orderable(value, expected):
            return False
        if op == "<":
            return value < expected
        if op == ">":
            return value > expected
        if op == "<=":
            return value <= expected
        return value >= expected

    return compare


def _same(value: Any, expected: Any) -> bool:
    # true == 1 is not a match: booleans compare only with booleans
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    return bool(value == expected)


def _orderable(value: Any, expected: Any) -> bool:
    numbers = (int, float)
    if isinstance(value, bool) or isinstance(expected, bool):
        return False
    both_numbers = isinstance(value, numbers) and isinstance(expected, numbers)
    return both_numbers or (isinstance(value, str) and isinstance(expected, str))


def compile_filter(text: str) -> Predicate:
    """Compile a display filter into a predicate over frame records (`Frame.to_json()`)."""
    return _Parser(text).parse()


class Selection:
    """What `read` shows: the display filter and the shorthand options, applied to each frame.

    Times are seconds from the capture's first packet, as the timeline shows them.
    """

    def __init__(
        self,
        expression: str | None = None,
        conns: tuple[int, ...] = (),
        channels: tuple[int, ...] = (),
        errors: bool = False,
        start: float | None = None,
        stop: float | None = None,
    ) -> None:
        self.predicate = compile_filter(expression) if expression else None
        self.conns = frozenset(conns)
        self.channels = frozenset(channels)
        self.errors = errors
        self.start = start
        self.stop = stop

    def accepts(self, frame: Any, first_ts: float) -> bool:
        if self.conns and frame.conn not in self.conns:
            return False
        if self.channels and frame.channel not in self.channels:
            return False
        if self.start is not None and frame.ts - first_ts < self.start:
            return False
        if self.stop is not None and frame.ts - first_ts > self.stop:
            return False
        if self.errors and not is_error(frame):
            return False
        return self.predicate is None or self.predicate(frame.to_json())


def is_error(frame: Any) -> bool:
    """A frame worth `--errors`: it has findings, or it carries an error (a 1.0 `error` field,
    a 0-9-1 reply code of 300 or more, a failed SASL outcome)."""
    if frame.findings:
        return True
    fields = frame.fields
    if fields.get("error"):
        return True
    code = fields.get("reply-code")
    if isinstance(code, int) and code >= 300:
        return True
    return frame.name == "sasl-outcome" and fields.get("code") not in (None, 0, "ok")
