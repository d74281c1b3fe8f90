"""What a frame says in a few words, and the frame as one JSON line.

`highlights` picks the fields that matter for each frame by the table `HIGHLIGHTS`
(`transfer h0 #12 tag=31 unsettled more`, `basic.deliver tag=5 redelivered`); the timeline and
the summary use it.

Captured strings (queue names, reply texts, bodies, container ids) may hold anything; printed
raw, an escape sequence in one would drive the reader's terminal. `safe` writes every control
character (C0, DEL, C1) and every Unicode direction override as a visible escape (`\x1b`,
`\u202e`); whatever reaches the terminal from a capture goes through it. (Rich markup in them is
harmless: the console is made with markup off and lines are built as `Text`, which is literal.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.track.tracker import Tracker

ARROWS: Final = {"c2s": "→", "s2c": "←"}
#: what a terminal could take for an instruction: C0 and C1 controls, DEL, the bidirectional
#: overrides and isolates, and the line and paragraph separators
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """`text` with every character a terminal could act on written as a visible escape.
    (Every such character is one `str.isprintable` refuses: most text needs no regex.)"""
    if text.isprintable():
        return text
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


MAX_VALUE: Final = 60  # characters of one value on a line; --json keeps everything

# How a highlighted field is written:
#   ("h", "handle")                 prefix: h0
#   ("credit=", "link-credit")      key=value
#   ("!more", "more")               the word when true
#   ("!settled|unsettled", ...)     the first word when true, the second when false
#   ("", "reply-name")              the value alone
#   ("..", "last")                  joined to the previous value as a range: 3..7
#   paths go into nested objects: "error.condition", "state.type"
Highlight = tuple[str, str]
_TUNE: Final = (
    ("channel-max=", "channel-max"),
    ("frame-max=", "frame-max"),
    ("heartbeat=", "heartbeat"),
)
_REPLY: Final = (("", "reply-code"), ("", "reply-name"), ("", "reply-text"), ("by ", "method"))
_BIND: Final = (("q=", "queue"), ("x=", "exchange"), ("key=", "routing-key"))
_X_BIND: Final = (("", "destination"), ("<- ", "source"), ("key=", "routing-key"))
_ERROR: Final = (("", "error.condition"), ("", "error.description"))
HIGHLIGHTS: Final[dict[str, dict[str, tuple[Highlight, ...]]]] = {
    "1.0": {
        "sasl-mechanisms": (("", "sasl-server-mechanisms"),),
        "sasl-init": (
            ("", "mechanism"),
            ("host=", "hostname"),
            ("user=", "initial-response.username"),
            ("password=", "initial-response.password"),  # only with --show-secrets
        ),
        "sasl-outcome": (("", "code"),),
        "open": (
            ("", "container-id"),
            ("host=", "hostname"),
            ("max-frame=", "max-frame-size"),
            ("channel-max=", "channel-max"),
            ("idle=", "idle-time-out"),
        ),
        "begin": (
            ("remote-ch=", "remote-channel"),
            ("next-out=", "next-outgoing-id"),
            ("in-win=", "incoming-window"),
            ("out-win=", "outgoing-window"),
        ),
        "attach": (  # the addresses before the name, which clients often generate (a UUID)
            ("h", "handle"),
            ("", "role"),
            ("!dynamic", "source.dynamic"),  # the peer names the node (its attach's address)
            ("!dynamic", "target.dynamic"),
            ("source=", "source.address"),
            ("target=", "target.address"),
            ("name=", "name"),
            ("snd=", "snd-settle-mode"),
        ),
        "flow": (
            ("h", "handle"),
            ("credit=", "link-credit"),
            ("dc=", "delivery-count"),
            ("available=", "available"),
            ("!drain", "drain"),
            ("!echo", "echo"),
            ("in-win=", "incoming-window"),
        ),
        "transfer": (
            ("h", "handle"),
            ("#", "delivery-id"),
            ("tag=", "delivery-tag"),
            ("!settled|unsettled", "settled"),
            ("", "state.type"),
            ("!more", "more"),
            ("!aborted", "aborted"),
        ),
        "disposition": (
            ("", "role"),
            ("", "first"),
            ("..", "last"),
            ("", "state.type"),
            ("!settled", "settled"),
        ),
        "detach": (("h", "handle"), ("!closed", "closed"), *_ERROR),
        "end": _ERROR,
        "close": _ERROR,
    },
    # `layer` records (TLS, WebSocket under AMQP): what the layer says of itself
    "layer": {
        "tls": (
            ("", "version"),
            ("", "cipher-suite"),
            ("sni=", "sni"),
            ("alpn=", "alpn"),
            ("!decrypted|not decrypted", "decrypted"),
        ),
        "websocket": (
            ("", "path"),
            ("subprotocol=", "subprotocol"),
            ("host=", "host"),
            ("", "extensions"),
            ("status=", "status"),
            ("", "reason"),
        ),
    },
    "0-9-1": {
        "connection.start": (("mechanisms=", "mechanisms"),),
        "connection.start-ok": (
            ("", "mechanism"),
            ("user=", "user"),
            ("password=", "response.password"),  # PLAIN; only with --show-secrets
            ("password=", "response.PASSWORD"),  # AMQPLAIN
        ),
        "connection.tune": _TUNE,
        "connection.tune-ok": _TUNE,
        "connection.open": (("vhost=", "virtual-host"),),
        "connection.close": _REPLY,
        "channel.close": _REPLY,
        "connection.blocked": (("", "reason"),),
        "channel.flow": (("!active|paused", "active"),),
        "exchange.declare": (
            ("", "exchange"),
            ("type=", "type"),
            ("!passive", "passive"),
            ("!durable", "durable"),
        ),
        "exchange.delete": (("", "exchange"),),
        "exchange.bind": _X_BIND,
        "exchange.unbind": _X_BIND,
        "queue.declare": (
            ("q=", "queue"),
            ("!passive", "passive"),
            ("!durable", "durable"),
            ("!exclusive", "exclusive"),
        ),
        "queue.declare-ok": (
            ("q=", "queue"),
            ("messages=", "message-count"),
            ("consumers=", "consumer-count"),
        ),
        "queue.bind": _BIND,
        "queue.unbind": _BIND,
        "queue.purge": (("q=", "queue"),),
        "queue.purge-ok": (("messages=", "message-count"),),
        "queue.delete": (("q=", "queue"),),
        "basic.qos": (("prefetch=", "prefetch-count"), ("!global", "global")),
        "basic.consume": (("q=", "queue"), ("ctag=", "consumer-tag"), ("!no-ack", "no-ack")),
        "basic.consume-ok": (("ctag=", "consumer-tag"),),
        "basic.cancel": (("ctag=", "consumer-tag"),),
        "basic.publish": (("x=", "exchange"), ("key=", "routing-key"), ("!mandatory", "mandatory")),
        "basic.return": (("", "reply-code"), ("", "reply-text"), ("key=", "routing-key")),
        "basic.deliver": (
            ("tag=", "delivery-tag"),
            ("key=", "routing-key"),
            ("!redelivered", "redelivered"),
        ),
        "basic.get": (("q=", "queue"), ("!no-ack", "no-ack")),
        "basic.get-ok": (
            ("tag=", "delivery-tag"),
            ("!redelivered", "redelivered"),
            ("left=", "message-count"),
        ),
        "basic.ack": (("tag=", "delivery-tag"), ("!multiple", "multiple")),
        "basic.nack": (
            ("tag=", "delivery-tag"),
            ("!multiple", "multiple"),
            ("!requeue", "requeue"),
        ),
        "basic.reject": (("tag=", "delivery-tag"), ("!requeue", "requeue")),
        "content-header": (("size=", "body-size"), ("", "properties.content-type")),
        "content-body": (("size=", "size"),),
    },
}
_MISSING: Final = object()
REDACTED: Final = "<redacted>"  # a secret the decoder hid: not worth a word on the line


#: a highlight as `highlights` reads it, made once from `HIGHLIGHTS` (not parsed per frame):
#: (how, label or the word when true, the word when false, the field's name when the path is
#: one step else "", the path's steps)
Rule = tuple[int, str, str, str, tuple[str, ...]]
_TEXT: Final = 0  # label then value
_WORD: Final = 1  # "!yes|no"
_RANGE: Final = 2  # ".."


def _rule(label: str, path: str) -> Rule:
    steps = tuple(path.split("."))
    key = path if len(steps) == 1 else ""
    if label.startswith("!"):
        yes, _, no = label[1:].partition("|")
        return (_WORD, yes, no, key, steps)
    return (_RANGE if label == ".." else _TEXT, label, "", key, steps)


RULES: Final[dict[str, dict[str, tuple[Rule, ...]]]] = {
    table: {
        name: tuple([_rule(label, path) for label, path in rules]) for name, rules in by.items()
    }
    for table, by in HIGHLIGHTS.items()
}


def _get(fields: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = fields
    for step in path:
        if not isinstance(value, dict) or step not in value:
            return _MISSING
        value = value[step]
    return value


#: `_text` of the strings lines show most (routing keys, queue names, consumer tags, states),
#: made once; forgotten whole when it holds `TEXTS_KEPT`
_TEXTS: Final[dict[str, str]] = {}
TEXTS_KEPT: Final = 4096
TEXTS_FROM: Final = 16  # characters of a string worth caching


def _text(value: Any) -> str:
    """A value as a line shows it: one line, safe, at most `MAX_VALUE` characters."""
    if isinstance(value, str):
        if len(value) < TEXTS_FROM:  # a tag, a word: made sooner than looked up
            text = safe(value.replace("\n", " "))
            return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"
        known = _TEXTS.get(value)
        if known is not None:
            return known
        text = safe(value.replace("\n", " "))
        text = text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"
        if len(_TEXTS) >= TEXTS_KEPT:
            _TEXTS.clear()
        _TEXTS[value] = text
        return text
    # an int's digits hold no line break and nothing to escape; not a bool's word, which
    # compiled code that narrowed the value to int would print as 0 (hence not isinstance)
    elif type(value) is int:
        text = str(value)
        return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"
    elif isinstance(value, list):
        text = ",".join(_text(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    else:
        text = str(value).replace("\n", " ")
    text = safe(text)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def transport_name(frame: Frame) -> str:
    """A `transport` record's name on a line, as a tcpdump reader says it: TCP FIN, TCP RST,
    TCP idle."""
    return f"TCP {frame.name.upper() if frame.name in ('fin', 'rst') else frame.name}"


def transport_detail(fields: dict[str, Any]) -> str:
    """Who ended the TCP connection: `(server)`, `(server, after the client's FIN)`, or nothing
    (idle: nobody sent anything)."""
    by, after = fields.get("by"), fields.get("after-fin")
    if not by:
        return ""
    return f"({by}, after the {after}'s FIN)" if after else f"({by})"


def highlights(frame: Frame) -> str:
    """The fields worth a glance, written as `HIGHLIGHTS` says (0-8 and 0-9 read as 0-9-1).
    Every captured value in it went through `_text`: a frame's highlights (but a `transport`
    record's) hold no control character, which the timeline's fast sinks count on."""
    if frame.kind == TRANSPORT:
        return transport_detail(frame.fields)
    if frame.kind == "layer":
        table = RULES["layer"]
    else:
        if frame.name == "transfer" and frame.version == "1.0":  # most 1.0 frames
            words = _transfer_words(frame.fields)
            if words:
                return words
        elif frame.version != "1.0":  # most 0-9-1 frames
            words = _basic_words(frame.name, frame.fields)
            if words:
                return words
        table = RULES["1.0" if frame.version == "1.0" else "0-9-1"]
    rules = table.get(frame.name)
    if rules is None:
        return ""
    return by_rules(rules, frame.fields)


def by_rules(rules: tuple[Rule, ...], fields: dict[str, Any]) -> str:
    """The highlights `rules` (a frame name's in `RULES`) pick from `fields`."""
    out: list[str] = []
    for how, label, no, key, path in rules:
        value = fields.get(key, _MISSING) if key else _get(fields, path)
        if value is _MISSING or value is None:
            continue
        if isinstance(value, str) and (not value or value == REDACTED):  # compiled: str compares
            continue
        if how == _WORD:
            word = label if value else no
            if word:
                out.append(word)
        elif how == _RANGE:
            text = _text(value)
            if out and out[-1] != text:
                out[-1] = out[-1] + ".." + text
        else:
            text = label + _text(value)
            if out and text.startswith(out[-1]):  # "PRECONDITION_FAILED - ..." says it already
                out[-1] = text
            else:
                out.append(text)
    return " ".join(out)


_UINT_MAX: Final = 0xFFFFFFFF


def _transfer_words(fields: dict[str, Any]) -> str:
    """`highlights` of the usual 1.0 transfer (HIGHLIGHTS' rules for it, written out): an int
    handle and delivery-id, a short tag of letters and digits, flags that are booleans, no
    state. "" for any other, which the rules then write."""
    handle = fields.get("handle")
    did = fields.get("delivery-id")
    tag = fields.get("delivery-tag")
    if type(handle) is not int or type(did) is not int or type(tag) is not str:
        return ""
    if not 0 <= handle <= _UINT_MAX or not 0 <= did <= _UINT_MAX:
        return ""
    if not 0 < len(tag) < TEXTS_FROM or not tag.isascii() or not tag.isalnum():
        return ""
    if "state" in fields:
        return ""
    settled = fields.get("settled")
    more = fields.get("more")
    aborted = fields.get("aborted")
    if settled is True:
        words = f"h{handle} #{did} tag={tag} settled"
    elif settled is False:
        words = f"h{handle} #{did} tag={tag} unsettled"
    elif settled is None:
        words = f"h{handle} #{did} tag={tag}"
    else:
        return ""
    if more is True:
        words += " more"
    elif more is not None and more is not False:
        return ""
    if aborted is True:
        words += " aborted"
    elif aborted is not None and aborted is not False:
        return ""
    return words


def frame_ndjson(frame: Frame) -> bytes:
    """One NDJSON line in UTF-8, newline included: bytes, so `read --json` hands orjson's output
    to the binary stdout without a decode and re-encode. orjson (about ten times faster than
    `json`) writes what `json` would, compact; what it refuses (a map with keys that are not
    strings, an integer beyond 64 bits) falls back to `json`. orjson is imported here, not with
    the module: its import loads zoneinfo and sysconfig (3 ms), which `summary` never needs."""
    global _lines
    if _lines is None:
        _lines = LineWriter()
    return _lines.line(frame)


def record_ndjson(frame: Frame) -> bytes:
    """`frame_ndjson` as `Frame.to_json` and one orjson call make it: the reference the
    line writer is tested against, and what it falls back to."""
    import orjson  # compiled, a check of a static once imported; interpreted, a dict lookup

    record = frame.to_json()
    try:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError is one
        return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


#: what a frame's line holds once its head is written, when it has no findings and no message
_NO_FINDINGS_END: Final = b',"findings":[]}\n'
_FIELDS: Final = b'"fields":'
#: distinct (connection, direction) heads and frame names kept before the caches start again
HEADS_KEPT: Final = 4096


#: a frame without findings: what its line's `findings` says (never changed)
_NO_FINDINGS: Final[list[Any]] = []
#: the text of the numbers frame heads hold most (channels, sizes), made once
_DIGITS: Final = tuple([str(i) for i in range(2048)])


class LineWriter:
    """Writes `Frame.to_json()` as orjson would, byte for byte, without making the record:
    the head (number, packet, time, connection, ends, channel, kind, name, size) is laid out
    as text from parts cached per connection and direction, per frame name and per packet,
    and orjson writes only what varies (fields, findings, message). The line of a frame read
    from a log, and of one whose fields orjson refuses, is `record_ndjson`'s."""

    def __init__(self) -> None:
        import orjson

        #: orjson's `dumps`, called directly (not looked up on the module per frame)
        self.dumps: Callable[..., bytes] = orjson.dumps
        self.newline: int = orjson.OPT_APPEND_NEWLINE
        #: the end of a line with findings or a message, written by one orjson call from a dict
        #: kept for it (its values set per frame): `{"fields":..,"findings":..[,"message":..]}`
        #: is the line's end once its `{` is dropped
        self.tail: dict[str, Any] = {"fields": None, "findings": None}
        self.tail_message: dict[str, Any] = {"fields": None, "findings": None, "message": None}
        #: conn * 2 + (1 from the server): (direction, src, dst, version, the head's text from
        #: `,"conn":` to `"channel":`)
        self.ends: dict[int, tuple[str, str, str, str, str]] = {}
        #: name: (kind, `,"kind":..,"name":..,"size":`)
        self.names: dict[str, tuple[str, str]] = {}
        #: the last packet and float time written, and their text (`,"packet":..,"ts":..`):
        #: the frames of one packet share it
        self.packet = -1
        self.ts = -1.0
        self.when = ""

    def line(self, frame: Frame) -> bytes:
        """The frame's line, newline included."""
        out: list[bytes] = []
        self.pieces(frame, out)
        return b"".join(out)

    def pieces(self, frame: Frame, out: list[bytes]) -> int:
        """The frame's line appended to `out` in pieces (`out` joins them with others in one
        copy); how many bytes they hold."""
        if frame.source is not None or frame.seen is not None:  # a log's, a merged one's
            line = record_ndjson(frame)
            out.append(line)
            return len(line)
        dumps = self.dumps
        direction = frame.direction
        key = frame.conn * 2 + 1 if direction == "s2c" else frame.conn * 2
        ends = self.ends.get(key)
        if (
            ends is None
            or ends[0] != direction
            or ends[1] != frame.src
            or ends[2] != frame.dst
            or ends[3] != frame.version
        ):
            ends = self._ends(frame, key)
        name = self.names.get(frame.name)
        if name is None or name[0] != frame.kind:
            name = self._name(frame)
        packet = frame.packet
        ts = frame.ts
        if packet == self.packet and ts == self.ts and isinstance(ts, float):
            when = self.when
        else:
            when = f',"packet":{packet},"ts":{dumps(ts).decode()}'
            if isinstance(ts, float):  # pure: an int time is written as one, not cached
                self.packet = packet
                self.ts = ts
                self.when = when
        channel = frame.channel
        if channel is None:
            said = "null"
        elif 0 <= channel < 2048:
            said = _DIGITS[channel]
        else:
            said = str(channel)
        size = len(frame.data)
        head = (
            f'{{"frame":{frame.number}{when}{ends[4]}{said}{name[1]}'
            f"{_DIGITS[size] if size < 2048 else str(size)},"
        ).encode()
        findings = frame.findings
        message = frame.message
        try:
            if not findings and message is None:
                fields = dumps(frame.fields)
                out.append(head)
                out.append(_FIELDS)
                out.append(fields)
                out.append(_NO_FINDINGS_END)
                return len(head) + len(_FIELDS) + len(fields) + len(_NO_FINDINGS_END)
            # fields, findings and message in one call: `{"fields":..}` and a newline
            tail = self.tail if message is None else self.tail_message
            tail["fields"] = frame.fields
            tail["findings"] = [f.to_json() for f in findings] if findings else _NO_FINDINGS
            if message is not None:
                tail["message"] = message
            end = dumps(tail, option=self.newline)
        except TypeError:  # a key that is not a string: `json` writes the whole record
            line = record_ndjson(frame)
            out.append(line)
            return len(line)
        out.append(head)
        out.append(end[1:])
        return len(head) + len(end) - 1

    def _ends(self, frame: Frame, key: int) -> tuple[str, str, str, str, str]:
        dumps = self.dumps
        text = (
            f',"conn":{frame.conn},"src":{dumps(frame.src).decode()}'
            f',"dst":{dumps(frame.dst).decode()}'
            f',"dir":{dumps(frame.direction).decode()}'
            f',"version":{dumps(frame.version).decode()},"channel":'
        )
        ends = (frame.direction, frame.src, frame.dst, frame.version, text)
        if len(self.ends) >= HEADS_KEPT:
            self.ends.clear()
        self.ends[key] = ends
        return ends

    def _name(self, frame: Frame) -> tuple[str, str]:
        dumps = self.dumps
        text = f',"kind":{dumps(frame.kind).decode()},"name":{dumps(frame.name).decode()},"size":'
        name = (frame.kind, text)
        if len(self.names) >= HEADS_KEPT:
            self.names.clear()
        self.names[frame.name] = name
        return name


#: `frame_ndjson`'s writer, made at its first line
_lines: LineWriter | None = None


def ndjson_all(
    frames: Iterable[Frame],
    tracker: Tracker,
    emit: Callable[[bytes], object],
    chunk: int,
) -> None:
    """`read --json` with nothing to select or count: each frame goes to the tracker (whose
    findings ride it), then out as its NDJSON line; the lines go to `emit` in runs of `chunk`
    bytes or more, and what is left at the end. The per-frame loop lives here, not in the CLI,
    so that the compiled build runs it as C (the tracker's `feed` a direct call, not one through
    a bound method)."""
    writer = LineWriter()
    parts: list[bytes] = []
    size = 0
    try:
        for frame in frames:
            tracker.feed(frame)
            size += writer.pieces(frame, parts)
            if size >= chunk:
                emit(b"".join(parts))
                parts = []
                size = 0
    finally:  # at the end, or interrupted: every line made so far goes out, whole
        if parts:
            emit(b"".join(parts))


def _as_is(value: Any) -> str | None:
    """A string value as `by_rules` writes it (`_text`), "" when the rules skip it (empty,
    redacted); None for any other value."""
    if type(value) is not str:
        return None
    if not value or value == REDACTED:
        return ""
    return _text(value)


def _number(value: Any) -> str | None:
    """An int value as `_text` writes it (not a bool), or None for any other value."""
    if type(value) is not int:
        return None
    text = str(value)
    return text if len(text) <= MAX_VALUE else None


def _basic_words(name: str, fields: dict[str, Any]) -> str:
    """`highlights` of the 0-9-1 frames a busy connection is made of (content headers and
    bodies, basic.publish, deliver and ack: HIGHLIGHTS' rules for them, written out) when their
    values are of the usual types: ints, booleans, strings. "" for any other, which the rules
    then write. No label of these starts with another's text, so the rules' merging of a text
    into the one before it happens only where a content-type starts with the size's text;
    words follow as they are."""
    if name == "content-header":
        size = _number(fields.get("body-size"))
        properties = fields.get("properties")
        if size is None or type(properties) is not dict:
            return ""
        kind = properties.get("content-type")
        if kind is None:
            return "size=" + size
        shown = _as_is(kind)
        if shown is None:
            return ""
        if not shown:
            return "size=" + size
        if shown.startswith("size=") and shown.startswith("size=" + size):
            return shown
        return f"size={size} {shown}"
    if name == "content-body":
        size = _number(fields.get("size"))
        return "" if size is None else "size=" + size
    if name == "basic.publish":
        exchange = _as_is(fields.get("exchange"))
        key = _as_is(fields.get("routing-key"))
        flag = fields.get("mandatory")
        if exchange is None or key is None or (flag is not True and flag is not False):
            return ""
        if exchange:
            words = f"x={exchange} key={key}" if key else "x=" + exchange
        else:
            words = "key=" + key if key else ""
        if flag:
            return words + " mandatory" if words else "mandatory"
        return words
    if name == "basic.deliver":
        tag = _number(fields.get("delivery-tag"))
        key = _as_is(fields.get("routing-key"))
        flag = fields.get("redelivered")
        if tag is None or key is None or (flag is not True and flag is not False):
            return ""
        if flag:
            return f"tag={tag} key={key} redelivered" if key else f"tag={tag} redelivered"
        return f"tag={tag} key={key}" if key else "tag=" + tag
    if name == "basic.ack":
        tag = _number(fields.get("delivery-tag"))
        flag = fields.get("multiple")
        if tag is None or (flag is not True and flag is not False):
            return ""
        return f"tag={tag} multiple" if flag else "tag=" + tag
    return ""
