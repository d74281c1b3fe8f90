"""The Azure SDK's pure-Python AMQP stack (`_pyamqp` in azure-servicebus / azure-eventhub),
logged with `logging_enable=True` / `network_trace=True` at DEBUG.

Written from its own code (azure-servicebus 7.x, `azure/servicebus/_pyamqp/`, read in the
package from PyPI): `_connection.py`, `session.py` and `link.py` log each frame as
`_LOGGER.debug("-> %r", frame)` or `("<- %r", OpenFrame(*frame))`: the repr of a namedtuple
from `performatives.py` (`OpenFrame`, `BeginFrame`, ..., `SASLInit`), keyword arguments in the
spec's field order under its own names (`send_settle_mode`), behind whatever prefix the
application's logging format gives. `-> Header(b'AMQP\\x00\\x01\\x00\\x00')` is the protocol
header, `-> EmptyFrame()` a heartbeat.

What the repr holds:
- a sent frame: the values pyamqp will encode (str for strings; nested types as namedtuple
  reprs, `Source(address=...)`);
- a received frame: what `_decode.py` made of the bytes: strings, symbols and binaries all as
  `bytes`, nested lists bare (source, target, error: their type is their field's), a delivery
  state as `{'accepted': []}`, trailing fields padded with their defaults, a transfer's payload
  as `<memory at 0x...>` (not shown).

So: no channel (the log never shows one; records have none), no payload of a received
transfer, and a `bytes` value in a place the spec does not type (a map value) is read as text
when it is printable UTF-8, else as binary (the repr cannot tell a string or symbol from a binary).
"""

from __future__ import annotations

import ast
import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.amqp10_encode import primitive
from amqpscope.logs.lines import (
    EMPTY,
    FRAME,
    HEADER,
    Logged,
    python_expr,
    search_at,
    timestamp,
)
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Described,
    Fields,
    LogLineEnded,
    LogSyntaxError,
    Map,
    Symbol,
    Uuid,
)
from amqpscope.logs.shapes import Shapes

NAME: Final = "pyamqp"

_LINE: Final = re.compile(r"(?P<dir>->|<-) (?P<call>[A-Z][A-Za-z]*\(.*\))\s*$")
#: a frame's start whose `)` the line does not reach (cut, or wrapped by a logger)
_STARTED: Final = re.compile(r"(?:->|<-) ([A-Z][A-Za-z]*)\(")
#: a value repr that is no Python literal (`<memory at 0x7f...>`): not shown
_OPAQUE: Final = re.compile(r"<[a-z][^<>]* at 0x[0-9a-fA-F]+>")
_NOT_SHOWN: Final = "_not_shown_"
#: how the application's log may name the connection (network trace `extra` fields)
_CONNECTION: Final = re.compile(r"(?:amqpConnection|Connection)[=:]\s*'?([\w.:-]+)")
#: performatives.py's class names -> spec composite names
_FRAMES: Final = {
    "OpenFrame": "open",
    "BeginFrame": "begin",
    "AttachFrame": "attach",
    "FlowFrame": "flow",
    "TransferFrame": "transfer",
    "DispositionFrame": "disposition",
    "DetachFrame": "detach",
    "EndFrame": "end",
    "CloseFrame": "close",
    "SASLMechanism": "sasl-mechanisms",
    "SASLInit": "sasl-init",
    "SASLChallenge": "sasl-challenge",
    "SASLResponse": "sasl-response",
    "SASLOutcome": "sasl-outcome",
}
#: nested namedtuples (endpoints.py, outcomes.py, error.py) -> spec composite names
_NESTED_CALLS: Final = {"AMQPError": "error", "Source": "source", "Target": "target"}
_COMPOSITES: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
_PROTOCOLS: Final = {0: "AMQP", 2: "TLS", 3: "SASL"}
#: an archetype (a `*` field's `requires`) -> the composites that provide it
_PROVIDERS: Final = {
    archetype: tuple(c.name for c in spec.COMPOSITES.values() if archetype in c.provides)
    for archetype in {p for c in spec.COMPOSITES.values() for p in c.provides}
}


def looks_like(line: str) -> bool:
    if "-> " not in line and "<- " not in line:
        return False
    m = _LINE.search(line)
    if m is None:
        started = _STARTED.search(line)  # a frame cut short (an excerpt's last line)
        return started is not None and started.group(1) in _FRAMES
    name = m.group("call").split("(", 1)[0]
    return name in _FRAMES or name == "Header"


def parse(line: str) -> Logged | None:
    if "-> " not in line and "<- " not in line:
        return None
    m = search_at(_LINE, line, "-> ", "<- ")
    if m is None:
        started = search_at(_STARTED, line, "-> ", "<- ")
        if started is not None and started.group(1) in _FRAMES:
            raise LogLineEnded(len(line), "the frame's text ends before its ')'")
        return None
    call_text = m.group("call")
    name = call_text.split("(", 1)[0]
    if name not in _FRAMES and name not in ("Header", "EmptyFrame"):
        return None
    prefix = line[: m.start()]
    conn_match = _CONNECTION.search(line) if "Connection" in line else None
    conn = conn_match.group(1) if conn_match else "pyamqp"
    direction = m.group("dir")
    ts = timestamp(prefix)
    if name == "EmptyFrame":
        return Logged(conn, direction, EMPTY, channel=None, ts=ts)
    shown = _OPAQUE.sub(_NOT_SHOWN, call_text) if " at 0x" in call_text else call_text
    if name != "Header":
        found = _SHAPES.made(shown)
        if found is not None:
            logged = Logged(conn, direction, FRAME, channel=None, ts=ts)
            logged.made, logged.lossy = found
            return logged
    try:
        tree = python_expr(shown)
    except SyntaxError as exc:
        raise LogSyntaxError(m.start("call") + (exc.offset or 1) - 1, "not a Python repr") from None
    if not isinstance(tree, ast.Call):
        raise LogSyntaxError(m.start("call"), "a frame repr expected")
    if name == "Header":
        raw = _literal(tree.args[0]) if tree.args else None
        if not isinstance(raw, bytes) or len(raw) != 8 or raw[4] not in _PROTOCOLS:
            raise LogSyntaxError(m.start("call"), "Header(b'AMQP....') expected")
        return Logged(conn, direction, HEADER, protocol=_PROTOCOLS[raw[4]], ts=ts)
    code, composite = _COMPOSITES[_FRAMES[name]]
    lossy: list[str] = []
    fields, payload = _fields(composite, tree, lossy, name)
    value = Described(code, composite.name, fields)
    if payload is None:  # a payload shown is not put back by the cache: not learned
        _SHAPES.learn(shown, value, lossy)
    logged = Logged(
        conn,
        direction,
        FRAME,
        channel=None,
        value=value,
        payload=payload,
        payload_size=len(payload) if payload else 0,
        ts=ts,
    )
    logged.lossy = lossy
    return logged


def _fields(
    composite: spec.Composite, call: ast.Call, lossy: list[str], where: str
) -> tuple[Fields, bytes | None]:
    """A namedtuple repr's keywords, in the spec's field order, typed by the spec."""
    fields = Fields()
    payload: bytes | None = None
    values = [kw.value for kw in call.keywords] or list(call.args)
    names = [kw.arg for kw in call.keywords]
    for index, node in enumerate(values):
        if index >= len(composite.fields):
            if names and names[index] == "payload":  # a transfer's payload, after its fields
                raw = _literal(node)
                if isinstance(raw, bytes) and raw != b"***":  # pyamqp masks what it sends
                    payload = raw
            continue
        field = composite.fields[index]
        value = _value(node, field, lossy, field.name)
        if value is not None and value is not _LOST:
            fields.append((field.name, value))
    return fields, payload


_LOST: Final = object()


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Name) and node.id == _NOT_SHOWN:
        return _LOST
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    try:  # a UUID inside a map or list (`{b'k': UUID('...')}`): no Python literal
        return _with_uuids(node)
    except (ValueError, TypeError):
        return _LOST


def _with_uuids(node: ast.AST) -> Any:
    """A literal that holds `UUID('...')` reprs (what `_decode.py` makes of a uuid), each as
    a `Uuid`; anything else that is no literal raises ValueError."""
    if isinstance(node, ast.Call):
        found = _uuid(node)
        if found is None:
            raise ValueError("not a literal")
        return found
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("not a literal")
        return {
            _with_uuids(k): _with_uuids(v)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_with_uuids(e) for e in node.elts]
    if isinstance(node, ast.Name) and node.id == _NOT_SHOWN:
        raise ValueError("not shown")
    return ast.literal_eval(node)


def _uuid(node: ast.Call) -> Uuid | None:
    """`UUID('e3e70682-...')` as pyamqp prints a uuid, else None."""
    func = node.func
    if not isinstance(func, ast.Name) or func.id != "UUID" or len(node.args) != 1:
        return None
    arg = node.args[0]
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return None
    digits = arg.value.replace("-", "")
    if len(digits) != 32:
        return None
    return Uuid(bytes.fromhex(digits))


def _value(node: ast.AST, field: spec.Field, lossy: list[str], where: str) -> Any:
    """The value of `node` for `field` (its type decides bytes, nested lists, widths)."""
    wanted = field.requires if field.type == "*" else field.type
    base = primitive(field.type)
    if isinstance(node, ast.Call):
        return _call(node, lossy, where)
    if isinstance(node, ast.Dict) and len(node.keys) == 1:
        key = _literal(node.keys[0]) if node.keys[0] is not None else None
        if isinstance(key, str) and key in _COMPOSITES and isinstance(node.values[0], ast.List):
            return _described(key, node.values[0].elts, lossy, where)  # {'accepted': []}
    if isinstance(node, ast.List) and (field.type == "*" or base in _COMPOSITES):
        # a described list whose type the repr dropped: the field's, when only one composite
        # with that many fields can be there (a target, not a coordinator, past one field)
        names = _PROVIDERS.get(wanted or "", ()) if field.type == "*" else (base,)
        fits = [
            n for n in names if n in _COMPOSITES and len(_COMPOSITES[n][1].fields) >= len(node.elts)
        ]
        if len(fits) == 1:
            return _described(fits[0], node.elts, lossy, where)
        lossy.append(where)
        return _LOST
    raw = _literal(node)
    if raw is _LOST:
        lossy.append(where)
        return _LOST
    return _typed(raw, field)


def _typed(raw: Any, field: spec.Field) -> Any:
    base = primitive(field.type)
    if field.multiple and raw is not None:
        items = raw if isinstance(raw, list) else [raw]
        if base == "symbol":
            return Array("symbol", [Symbol(_text(i)) for i in items])
        return [_untyped(i) for i in items]
    if isinstance(raw, (bytes, str)):
        if base == "symbol":
            return Symbol(_text(raw))
        if base == "string":
            return _text(raw)
        if base == "binary":
            return Binary(raw if isinstance(raw, bytes) else raw.encode())
    if base in ("map", "fields") and isinstance(raw, dict):
        return Map([(_key(k, base == "fields"), _untyped(v)) for k, v in raw.items()])
    return _untyped(raw)


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _key(key: Any, symbol: bool) -> Any:
    if symbol and isinstance(key, (bytes, str)):
        return Symbol(_text(key))
    return _untyped(key)


def _untyped(raw: Any) -> Any:
    """A value where the spec gives no type: bytes as text when UTF-8 (see the docstring)."""
    if isinstance(raw, Uuid):
        return raw
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return Binary(raw)
        return text if text.isprintable() else Binary(raw)
    if isinstance(raw, dict):
        return Map([(_untyped(k), _untyped(v)) for k, v in raw.items()])
    if isinstance(raw, (list, tuple)):
        return [_untyped(v) for v in raw]
    return raw


def _described(name: str, elements: list[ast.expr], lossy: list[str], where: str) -> Described:
    code, composite = _COMPOSITES[name]
    fields = Fields()
    for field, node in zip(composite.fields, elements, strict=False):
        value = _value(node, field, lossy, f"{where}.{field.name}")
        if value is not None and value is not _LOST:
            fields.append((field.name, value))
    return Described(code, composite.name, fields)


def _call(node: ast.Call, lossy: list[str], where: str) -> Any:
    """A nested namedtuple repr (`Source(...)`, `AMQPError(...)`, `Accepted()`), or UUID."""
    found = _uuid(node)
    if found is not None:
        return found
    func = node.func
    name = func.id if isinstance(func, ast.Name) else ""
    composite_name = _NESTED_CALLS.get(name, name.lower())
    if composite_name not in _COMPOSITES:
        lossy.append(where)
        return _LOST
    code, composite = _COMPOSITES[composite_name]
    fields, _ = _fields(composite, node, lossy, where)
    return Described(code, composite.name, fields)


def _read(text: str) -> tuple[Any, list[str]]:
    """A frame's repr alone (`shapes.Shapes` reads it again with other numbers)."""
    tree = python_expr(text)
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise LogSyntaxError(0, "a frame repr expected")
    code, composite = _COMPOSITES[_FRAMES[tree.func.id]]
    lossy: list[str] = []
    fields, payload = _fields(composite, tree, lossy, tree.func.id)
    if payload is not None:
        raise LogSyntaxError(0, "a payload shown")
    return Described(code, composite.name, fields), lossy


#: performatives read before (`shapes.py`)
_SHAPES: Final = Shapes(_read)
