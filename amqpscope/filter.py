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

from amqpscope.codec.frames import is_error
from amqpscope.codec.typed import typed_fields
from amqpscope.track.amqp091.rules import name as text_key

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


#: how deep `(` and `not` may nest (the page's port of this parser, render/html/filter.js, too)
MAX_NESTING = 100


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
        self.depth = 0  # of `(` and `not`: the parser recurses, so it is bounded

    def nest(self, col: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise FilterError(f"nested too deeply (more than {MAX_NESTING} levels)", col)

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
            self.nest(self.take()[2])
            inner = self.not_expr()
            self.depth -= 1
            return lambda r: not inner(r)
        return self.primary()

    def primary(self) -> Predicate:
        kind, value, col = self.peek()
        if kind == "op" and value == "(":
            self.nest(self.take()[2])
            inner = self.or_expr()
            kind, value, col = self.take()
            if value != ")":
                raise FilterError("expected ')'", col)
            self.depth -= 1
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
        except (re.error, OverflowError) as exc:  # OverflowError: a repeat count past 2**32-1
            raise FilterError(f"bad regular expression: {exc}", col) from None
        except RecursionError:
            raise FilterError("bad regular expression: nested too deeply", col) from None

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
        links: tuple[str, ...] = (),
        queues: tuple[str, ...] = (),
    ) -> None:
        self.predicate = compile_filter(expression) if expression else None
        # --link and --queue learn from every frame, so they see frames the others reject
        self.link_scope = LinkScope(links, queues) if links or queues else None
        self.queue_scope = QueueScope(queues) if queues else None
        self.conns = frozenset(conns)
        self.channels = frozenset(channels)
        self.errors = errors
        self.start = start
        self.stop = stop

    def accepts(self, frame: Any, first_ts: float) -> bool:
        if self.link_scope is not None:
            if frame.version == "1.0":
                in_scope = self.link_scope.accepts(frame)
            else:
                in_scope = self.queue_scope is not None and self.queue_scope.accepts(frame)
            if not in_scope:
                return False
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


class LinkScope:
    """The frames of named AMQP 1.0 links, learned from the wire as it goes (sans-IO).

    A link is named by its attach (`--link NAME`) or by the node it attaches to (`--queue Q`: a
    source or target address that is Q or ends with /Q). Its frames are those on the handle the
    attach gave it on each side, and the dispositions that settle its deliveries."""

    MAX_IDS = 100_000  # delivery ids remembered per capture, for dispositions

    def __init__(self, names: tuple[str, ...] = (), queues: tuple[str, ...] = ()) -> None:
        self.names = frozenset(names)
        self.queues = tuple(queues)
        self.handles: dict[tuple[int, int | None, str], set[int | None]] = {}
        self.ids: dict[tuple[int, int | None, str], set[int]] = {}

    def _wanted(self, fields: dict[str, Any]) -> bool:
        if fields.get("name") in self.names:
            return True
        for end in ("source", "target"):
            address = (fields.get(end) or {}).get("address")
            if isinstance(address, str) and any(
                address == q or address.endswith("/" + q) for q in self.queues
            ):
                return True
        return False

    def accepts(self, frame: Any) -> bool:
        fields = typed_fields(frame)  # a handle or id of another type is no handle or id
        key = (frame.conn, frame.channel, frame.direction)
        if frame.name == "attach":
            handles = self.handles.setdefault(key, set())
            if self._wanted(fields):
                handles.add(fields.get("handle"))
                return True
            handles.discard(fields.get("handle"))  # a reused handle now names another link
            return False
        if frame.name == "disposition":
            sender = (frame.conn, frame.channel, "s2c" if frame.direction == "c2s" else "c2s")
            ids = self.ids.get(sender, set())
            first = fields.get("first", -1)
            last = fields.get("last", first)
            return any(i in ids for i in range(first, min(last, first + 10_000) + 1))
        handle = fields.get("handle")
        if handle is None or handle not in self.handles.get(key, ()):
            return False
        delivery = fields.get("delivery-id")
        if frame.name == "transfer" and delivery is not None:
            ids = self.ids.setdefault(key, set())
            if sum(len(s) for s in self.ids.values()) < self.MAX_IDS:
                ids.add(delivery)
        return True


class QueueScope:
    """The 0-9-1 frames that concern a queue (`--queue Q`): its declare, bind, purge and delete,
    consumes and gets on it and the deliveries they bring, their acks, publishes routed to it by
    the default exchange, and the content frames of those messages."""

    def __init__(self, queues: tuple[str, ...]) -> None:
        self.queues = frozenset(queues)
        self.consumers: set[tuple[int, str]] = set()  # (conn, consumer tag)
        self.pending: dict[tuple[int, int | None], str] = {}  # consume or get awaiting its -ok
        self.tags: dict[tuple[int, int | None], set[int]] = {}  # matched delivery tags
        self.last: dict[tuple[int, int | None, str], bool] = {}  # did the last method match?

    def accepts(self, frame: Any) -> bool:
        fields = frame.fields
        channel = (frame.conn, frame.channel)
        if frame.kind in ("content-header", "content-body"):
            return self.last.get((frame.conn, frame.channel, frame.direction), False)
        if frame.kind != "method":
            return False
        name = frame.name
        hit = text_key(fields.get("queue")) in self.queues
        if name in ("basic.consume", "basic.get") and hit:
            self.pending[channel] = name
            if fields.get("consumer-tag"):
                self.consumers.add((frame.conn, text_key(fields["consumer-tag"])))
        elif name == "basic.consume-ok" and self.pending.pop(channel, ""):
            self.consumers.add((frame.conn, text_key(fields.get("consumer-tag", ""))))
            hit = True
        elif name in ("basic.get-ok", "basic.get-empty") and self.pending.pop(channel, ""):
            hit = True
        elif name in ("basic.deliver", "basic.cancel", "basic.cancel-ok"):
            hit = (frame.conn, text_key(fields.get("consumer-tag"))) in self.consumers
        elif name == "basic.publish":
            hit = (
                fields.get("exchange") == "" and text_key(fields.get("routing-key")) in self.queues
            )
        elif name in ("basic.ack", "basic.nack", "basic.reject"):
            tags = self.tags.get(channel, set())
            tag = fields.get("delivery-tag", -1)
            hit = tag in tags or (bool(fields.get("multiple")) and any(t <= tag for t in tags))
            if hit and frame.direction == "c2s":
                if fields.get("multiple"):
                    tags.difference_update({t for t in tags if t <= tag} if tag else set(tags))
                else:
                    tags.discard(tag)
        if hit and name in ("basic.deliver", "basic.get-ok"):
            self.tags.setdefault(channel, set()).add(fields.get("delivery-tag", -1))
        self.last[(frame.conn, frame.channel, frame.direction)] = hit
        return hit
