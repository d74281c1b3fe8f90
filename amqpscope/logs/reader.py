"""Log lines in, frame records out: the log source's front door (sans-IO).

A grammar (`proton.py`, ...) reads one line into a `Logged`; this module keeps what spans lines
and makes the frame records the trackers take:

- connections: by the logger's name for them (`[0x55d2...]`, `[C3]`), numbered 1, 2, ... in
  order of appearance. A name seen again after that connection's end of stream (Proton reuses
  freed addresses) is a new connection.
- direction: `->` was sent by the logger. The logger is the client unless the connection's
  first logged line is one it received (the listening side reads the header first) or it
  sends `sasl-mechanisms`, which only a server does.
- fields and messages: a 1.0 frame is encoded back into bytes and decoded by
  `codec.amqp10.Decoder` (one per direction), so names and value shapes are the capture's.
- `ts` from the line's timestamp (0.0, shown as null, when it has none), placed by a
  `lines.Clock` (a time with no date, a date with no year: see there); a time in a form no
  grammar reads is one `log.no-time` finding for the log. `source` is the file and line number.

Damage never raises: a line that looks like a frame and does not parse is a `log.bad-line`
finding with its line number; the last line cut short is `log.cut-line`; lines that are no
frame are counted (`skipped`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from amqpscope.codec import detect
from amqpscope.codec import frames as k
from amqpscope.codec.amqp091 import decoder as decoder091
from amqpscope.codec.amqp091 import frames as frames091
from amqpscope.codec.amqp10 import spec
from amqpscope.codec.amqp10.decoder import Decoder
from amqpscope.codec.amqp10.frames import BODIES, TYPE_SASL, make_frame
from amqpscope.findings import Finding, finding
from amqpscope.logs import direct, pika, proton
from amqpscope.logs.amqp10_encode import TYPE_AMQP, encode, frame_bytes
from amqpscope.logs.formats import FORMATS
from amqpscope.logs.lines import (
    ACCEPTED,
    EMPTY,
    EOS,
    FRAME,
    HEADER,
    SENT,
    Clock,
    Logged,
    timestamp,
)
from amqpscope.logs.partial import closings
from amqpscope.logs.proton_values import Described, LogLineEnded, LogSyntaxError
from amqpscope.logs.unwrap import cut_repr, number_after, respace, unwrap

#: protocol header bytes of the pseudo frames
_HEADER_BYTES: Final = {
    "AMQP": b"AMQP\x00\x01\x00\x00",
    "SASL": b"AMQP\x03\x01\x00\x00",
    "TLS": b"AMQP\x02\x01\x00\x00",
}
_SASL_CODES: Final = frozenset(BODIES[TYPE_SASL])
_SASL_NAMES: Final = frozenset(BODIES[TYPE_SASL].values())
#: a line longer than this is not read (a log line is a frame; a frame is far shorter)
MAX_LINE: Final = 16 * 1024 * 1024
#: what reading or encoding a logged frame raises on text no frame could be (the round trip
#: packs what the log printed: `@<uint>[inf]` or a channel past 65535 is a bad line, not a crash)
_ENCODING_ERRORS: Final = (
    LogSyntaxError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    OverflowError,
    struct.error,
)
#: lines one logged frame may be wrapped over
MAX_WRAPPED: Final = 16
#: how many lines apart two prints of one frame by different lines of the library are (go-amqp
#: at debug level 2: the session's line, the mux's, then the writer's; `Logged.again`)
AGAIN_LINES: Final = 12
#: connections followed at once; past it the oldest is forgotten (memory stays bounded)
MAX_CONNECTIONS: Final = 10_000
#: lines that are no frame of the log's format asked whether they are another format's frames
#: (two logs in one file, a wrong `--format`): the first ones only, so a log of mostly other
#: lines costs no more past them
OTHERS_ASKED: Final = 20_000


class _Connection:
    """One logged connection: its number, the logger's role, a decoder per direction."""

    __slots__ = (
        "client",
        "conn",
        "damage",
        "decoders",
        "ended",
        "headers",
        "label",
        "last_line",
        "unsure",
    )
    # `ended`: the directions whose end of stream the log showed (Proton logs `-> EOS` when
    # its output closes and `<- EOS` when its input does; the connection is over with both)

    def __init__(
        self,
        conn: int,
        label: str,
        client: bool,
        show_secrets: bool,
        messages: bool,
        version: str = "1.0",
        redact_bodies: bool = False,
    ) -> None:
        self.conn = conn
        self.label = label
        self.client = client  # the logger is the client
        self.decoders: dict[str, Decoder | decoder091.Decoder] = {
            way: (
                decoder091.Decoder(
                    version,
                    show_secrets=show_secrets,
                    redact_bodies=redact_bodies,
                    messages=messages,
                )
                if version != "1.0"
                else Decoder(
                    show_secrets=show_secrets, messages=messages, redact_bodies=redact_bodies
                )
            )
            for way in ("c2s", "s2c")
        }
        self.ended: set[str] = set()
        #: the protocol headers logged, (arrow, protocol): one logged again starts another
        #: connection under the same label (uamqp's log names none: one label for them all)
        self.headers: set[tuple[str, str]] = set()
        self.last_line = 0  # the line of its last frame (0: none yet)
        #: the last line that did not parse since this connection's frames began (0: none),
        #: and the directions whose first frame after it is still to come (`log.lost-line`)
        self.damage = 0
        self.unsure: tuple[str, ...] = ()

    def direction(self, arrow: str) -> str:
        return "c2s" if (arrow == SENT) == self.client else "s2c"


class LogReader:
    """Feed lines (with their line numbers), get frame records; `findings` holds what no frame
    carries, `skipped` counts lines that are no frame."""

    def __init__(
        self,
        name: str,
        fmt: str = proton.NAME,
        show_secrets: bool = False,
        messages: bool = True,
        redact_bodies: bool = False,
        direct_fields: bool = True,
        now: float | None = None,
    ) -> None:
        self.name = name
        #: places times with no date or no year (`now`: when the log is read, for the year)
        self.clock = Clock(now)
        #: the first line whose time no form reads (0: none)
        self.no_time = 0
        #: fields made straight in the decoder's shapes (`direct.py`); False: every frame by
        #: the round trip through bytes (the reference `tests/test_logs_direct.py` holds it to)
        self.direct = direct_fields
        self.fmt = fmt
        self.parse: Callable[[str], Logged | None] = FORMATS[fmt].parse
        self.damaged = FORMATS[fmt].damaged
        self.shown = FORMATS[fmt].shown
        make = FORMATS[fmt].completions
        self.completions = make() if make is not None else None
        self.show_secrets = show_secrets
        self.messages = messages
        self.redact_bodies = redact_bodies  # bodies counted, never kept (--redact-bodies)
        self.connections: dict[str, _Connection] = {}
        self.count = 0  # connections so far
        self.number = 0  # frames so far
        self.findings: list[Finding] = []
        self.skipped = 0
        #: lines read as the rest of a frame a line before them began (a wrap, a split), so
        #: that every line is a frame's, a finding's, a join's or a skipped one
        self.joined = 0
        #: lines that printed a frame another line printed (`Logged.again`), among `skipped`
        self.printed_again = 0
        #: (direction, frame text) -> (line, who printed it), the frames printed lately
        self.printed: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
        self.last_label = ""  # the connection of the last frame so printed
        #: the last frame the connection's own reader or writer printed, while no other line
        #: printed one (direction, text, line)
        self.last_printed: tuple[str, str, int] | None = None
        #: a frame's text that ended unfinished: (text, its first line, lines joined so far,
        #: what it reads as alone: a transfer whose payload the line cut, else None)
        self.pending: tuple[str, int, int, Logged | None] | None = None
        self.ends = 0  # end-of-stream and accepted-connection lines: logged, but no frame
        self.lines = 0
        #: the last line `_frame_alone` read, and what it read as (or the error it raised)
        self.read: tuple[str, Logged | None, Exception | None] | None = None
        #: findings frames carry (`_not_shown`, `_cut`)
        self.not_shown: dict[tuple[str, str], Finding] = {}
        self.cuts: dict[int, Finding] = {}
        #: the last line that looked like a frame and did not parse (0: none): the first frame
        #: after it in each direction of a connection that had one before it carries
        #: `log.lost-line` (`diagnose.lost.lost_line` doubts the frames from the first to the
        #: last of them, no later one)
        self.bad_line = 0
        #: skipped lines that another format reads as its frames: format -> (count, first line)
        self.others: dict[str, tuple[int, int]] = {}
        #: the time the current line's wrapper held (`unwrap`: a Docker record's), "" if none
        self.when = ""

    def feed(self, line: str, number: int) -> list[k.Frame]:
        """The records line `number` (1-based) holds: none, or one. A frame whose text ends
        unfinished waits for the next line (a logger or terminal that wraps long lines):
        joined without the next line's indentation when it has some (a logger's), else as it
        is (a hard wrap), it is one record on its first line; if neither reads, or the next
        line is a frame of its own, the first line is a finding and this line is read on its
        own. (A hard wrap just before a space inside a string loses that space: the text
        cannot say.) What wraps the line (a JSON record, a bytes repr: `unwrap.py`) is peeled
        first."""
        self.lines += 1
        line, self.when = unwrap(line)
        odd = not line.isascii() or "\t" in line
        last = line[-2:-1] if line[-1:] == "\n" else line[-1:]
        if (odd or "0" <= last <= "9") and not self._whole(line):
            line = self._pasted(line, odd)
        pending = self.pending
        if pending is not None:
            self.pending = None
            text, first, count, alone = pending
            going_on: tuple[str, int, int, Logged | None] | None = None
            # an indented continuation is most likely a logger's indentation, else a hard wrap
            order: tuple[str, ...] = ()
            # the joins are made only for a line that is no frame of its own (measured: rhea's
            # every transfer waits here for the next line, a frame; bench/logs.py's rhea log)
            if not self._frame_alone(line):
                kept, stripped = text + line, text + line.lstrip()
                order = (stripped, kept) if line[:1] in (" ", "\t") else (kept, stripped)
                repeated = _repeated_prefix(text, line)
                if repeated:  # the logger's prefix again before the rest (journald's split)
                    order = (text + line[repeated:], *order)
            for joined in order:
                try:
                    logged = self.parse(joined)
                except (LogSyntaxError, ValueError, KeyError, IndexError, TypeError) as why:
                    ended = isinstance(why, LogLineEnded) or (
                        isinstance(why, LogSyntaxError) and _may_go_on(joined)
                    )
                    if ended and going_on is None and count < MAX_WRAPPED:
                        going_on = (joined.rstrip("\r\n"), first, count + 1, alone)
                    continue
                if logged is None:
                    continue
                if _payload_cut(logged) and count < MAX_WRAPPED and line.endswith("\n"):
                    self.pending = (joined.rstrip("\r\n"), first, count + 1, logged)
                    return []
                self.joined += count
                return self._emit(logged, joined, first)
            if going_on is not None and line.endswith("\n"):
                self.pending = going_on
                return []
            if alone is not None:  # the payload was cut, not wrapped: the frame as it read
                self.joined += count - 1
                return self._emit(alone, text, first) + self._line(line, number)
            what = f"{self.name}:{first}: a frame's text that ends unfinished"
            self.findings.append(finding("log.bad-line", what))
            self.bad_line = first
            self.joined += count - 1
            return self._truncated(text, first) + self._line(line, number)
        return self._line(line, number)

    def _pasted(self, line: str, odd: bool) -> str:
        """A line that does not read as it is, as the library printed it before a paste put
        tabs or no-break spaces for its spaces (`odd`), or a line number after it: without
        the number only if it reads so."""
        if odd:
            line = respace(line)
            if self._whole(line):
                return line
        at = number_after(line)
        if at:
            bare = line[:at].rstrip() + line[len(line.rstrip("\r\n")) :]
            if self._frame_alone(bare):
                return bare
        return line

    def _whole(self, line: str) -> bool:
        """Whether `line` reads as a frame as it is, its payload (if any) whole."""
        if not self._frame_alone(line):
            return False
        read = self.read
        return read is None or read[1] is None or not _payload_cut(read[1])

    def _frame_alone(self, line: str) -> bool:
        """Whether `line` is a frame of its own (then it goes on nothing before it). What it
        reads as is kept for `_parse`, which reads the same line next (rhea cuts every payload
        past 50 bytes: each transfer waits for the next line, which would be read twice)."""
        try:
            logged = self.parse(line)
        except (LogSyntaxError, ValueError, KeyError, IndexError, TypeError) as why:
            self.read = (line, None, why)
            return False
        self.read = (line, logged, None)
        return logged is not None

    def _parse(self, line: str) -> Logged | None:
        """`parse(line)`, or what `_frame_alone` read of this very line."""
        read = self.read
        if read is not None:
            self.read = None
            if read[0] is line:
                if read[2] is not None:
                    raise read[2]
                return read[1]
        return self.parse(line)

    def _line(self, line: str, number: int) -> list[k.Frame]:
        cut = not line.endswith("\n")
        try:
            if len(line) > MAX_LINE:
                raise LogSyntaxError(MAX_LINE, f"line of {len(line)} characters")
            logged = self._parse(line)
        except LogLineEnded as why:
            if not cut:  # may go on in the next line
                self.pending = (line.rstrip("\r\n"), number, 1, None)
                return []
            self.findings.append(finding("log.cut-line", f"{self.name}:{number}: {why}"))
            return self._truncated(line, number)
        except (LogSyntaxError, ValueError, KeyError, IndexError, TypeError) as why:
            if not cut and isinstance(why, LogSyntaxError) and _may_go_on(line):
                self.pending = (line.rstrip("\r\n"), number, 1, None)  # a token cut by a wrap
                return []
            code = "log.cut-line" if cut and line.strip() else "log.bad-line"
            self.findings.append(finding(code, f"{self.name}:{number}: {why}"))
            self.bad_line = number
            return self._truncated(line, number) if code == "log.cut-line" else []
        if logged is not None and not cut and _payload_cut(logged):
            self.pending = (line.rstrip("\r\n"), number, 1, logged)  # wrapped, or cut short
            return []
        if logged is None:
            if cut and line.strip():  # the last line, unterminated: cut while it was written
                what = f"{self.name}:{number}: no frame in the log's unterminated last line"
                self.findings.append(finding("log.cut-line", what))
                return self._truncated(line, number)
            elif self.damaged is not None and (broken := self.damaged(line)) is not None:
                self.findings.append(finding("log.bad-line", f"{self.name}:{number}: {broken}"))
                self.bad_line = number
            else:
                self.skipped += 1
                if self.skipped <= OTHERS_ASKED:
                    self._other_format(line, number)
            return []
        return self._emit(logged, line, number)

    def _other_format(self, line: str, number: int) -> None:
        """Count `line` under the other format that reads it as a frame, if one does: such a
        line is not read here, and must not pass as one more line of no frame."""
        for name, fmt in FORMATS.items():
            if fmt.parse is self.parse or not fmt.looks_like(line):
                continue
            try:
                read = fmt.parse(line)
            except _ENCODING_ERRORS:
                continue
            if read is not None:
                count, first = self.others.get(name, (0, number))
                self.others[name] = (count + 1, first)
                return

    def _emit(self, logged: Logged, line: str, number: int) -> list[k.Frame]:
        """The record of what line `number` logged (none for an end of stream, or for a frame
        another line printed a few lines away: `Logged.again`)."""
        again = logged.again
        if again is not None and not again[0] and not self.printed:
            # the connection's own frame line, and no other line that prints frames seen
            # lately: only kept, for such a line that may follow (the cost of a plain log)
            self.last_printed = (logged.direction, again[1], number)
            self.last_label = logged.conn
        elif again is not None:
            who, text = again
            if not self.printed and self.last_printed is not None:
                direction, printed, at = self.last_printed
                self.printed[(direction, printed)] = (at, ("",))
            key = (logged.direction, text)
            seen = self.printed.get(key)
            if seen is not None and who not in seen[1] and number - seen[0] <= AGAIN_LINES:
                self.printed[key] = (number, (*seen[1], who))
                self.skipped += 1
                self.printed_again += 1
                return []
            if len(self.printed) >= 4 * AGAIN_LINES:
                self.printed = {
                    key: seen
                    for key, seen in self.printed.items()
                    if number - seen[0] <= AGAIN_LINES
                }
            self.printed[key] = (number, (who,))
            if not logged.conn:  # printed where the connection is not named: the last one's
                logged.conn = self.last_label or "go-amqp"
            self.last_label = logged.conn
        try:
            frame = self._record(logged)
        except _ENCODING_ERRORS as why:
            cut = not line.endswith("\n") and line.strip()
            code = "log.cut-line" if cut else "log.bad-line"
            self.findings.append(finding(code, f"{self.name}:{number}: {why}"))
            self.bad_line = number
            return []
        if frame is None:
            return []
        if logged.ts != logged.ts and not self.no_time:  # NaN: a time no form reads
            self.no_time = number
        connection = self.connections.get(logged.conn)
        if connection is not None:
            if 0 < connection.last_line < self.bad_line and connection.damage != self.bad_line:
                # a line that looked like a frame and did not parse, since this connection's
                # last frame: the first frame after it in each direction is in doubt (up to
                # both, a frame missing there can make a frame look out of place)
                connection.damage = self.bad_line
                connection.unsure = ("c2s", "s2c")
            if frame.direction in connection.unsure:
                connection.unsure = tuple(d for d in connection.unsure if d != frame.direction)
                what = (
                    f"line {connection.damage}, before this frame, looked like a frame and did"
                    " not parse: a frame of this connection may be missing from the log before it"
                )
                frame.findings.append(finding("log.lost-line", what))
            connection.last_line = number
        self.number += 1
        frame.number = self.number
        frame.source = {"file": self.name, "line": number}
        return [frame]

    def flush(self) -> list[k.Frame]:
        """The input ended: a frame still waiting for the rest of its text is read as it is
        (a transfer whose payload was cut) or is a finding. Call before `finish`."""
        if self.pending is None:
            return []
        text, first, count, alone = self.pending
        self.pending = None
        self.joined += count - 1
        if alone is not None:
            return self._emit(alone, text, first)
        what = f"{self.name}:{first}: the log ends inside this frame"
        self.findings.append(finding("log.cut-line", what))
        return self._truncated(text, first)

    def _truncated(self, text: str, number: int) -> list[k.Frame]:
        """The record of what a frame's `text` (line `number` on), cut short, still says: the
        frame's name and the fields before the cut (`partial.closings`), its `source` marked
        `truncated`; none when no closing of it reads as a frame. The cut stays a finding."""
        if "\n" in text.rstrip("\r\n"):
            return []
        found = self._truncated_as(text.rstrip("\r\n"), number)
        if found:
            return found
        inside = cut_repr(text.rstrip("\r\n"))  # a Python bytes repr the cut left open
        if inside is None:
            return []
        self.when = self.when or inside[1]
        return self._truncated_as(inside[0], number)

    def _truncated_as(self, text: str, number: int) -> list[k.Frame]:
        for closed in closings(text):
            try:
                logged = self.parse(closed)
            except _ENCODING_ERRORS:
                continue
            if logged is None or logged.kind != FRAME:
                continue
            shown = _shown(logged)  # before rhea's completions fill in what its text omits
            if shown is not None and self.shown is not None:
                names = self.shown(closed)
                if names is not None:
                    shown = shown[0], names & shown[1]
            try:
                frame = self._record(logged)
            except _ENCODING_ERRORS:
                continue
            if frame is None:
                continue
            _only_shown(frame, shown)
            self.number += 1
            frame.number = self.number
            frame.source = {"file": self.name, "line": number, "truncated": True}
            connection = self.connections.get(logged.conn)
            if connection is not None:
                connection.last_line = number
            return [frame]
        return []

    def finish(self) -> list[Finding]:
        """The log ended: deliveries left incomplete, as the capture's end reports them."""
        self.flush()
        for connection in self.connections.values():
            self._forget(connection)
        self.connections.clear()
        for name, (count, first) in self.others.items():
            what = (
                f"{self.name}:{first}: {count} line(s) are {name} frames, not read in a log read"
                f" as {self.fmt} (two logs in one file? read each alone, or with --format {name})"
            )
            self.findings.append(finding("log.other-format", what))
        self.others.clear()
        if self.no_time:
            what = (
                f"{self.name}:{self.no_time}: the lines' time is in a form amqpscope does not"
                " read (it reads ISO 8601, ctime, syslog's, a time of day, epoch seconds):"
                " frames carry no times"
            )
            self.findings.append(finding("log.no-time", what))
            self.no_time = 0
        return self.findings

    def skipped_finding(self) -> Finding | None:
        """The lines that were no frame, counted as one finding (read, summary and the Spark
        tables report it alike), or None."""
        if not self.skipped:
            return None
        what = f"{self.name}: {self.skipped} of {self.lines} lines are no "
        if self.printed_again:
            what = (
                f"{self.name}: {self.skipped} of {self.lines} lines, {self.printed_again} of them"
                " a frame another line printed, are no other "
            )
        return finding("log.skipped-lines", what + f"{self.fmt} frame (skipped)")

    def _connection(self, logged: Logged) -> _Connection:
        connection = self.connections.get(logged.conn)
        if (
            connection is None
            or (len(connection.ended) == 2 and logged.kind != EOS)
            or (logged.kind == HEADER and (logged.direction, logged.protocol) in connection.headers)
        ):
            client = logged.direction == SENT
            if logged.version != "1.0":  # a 0-9-1 client's log (pika): the logger is the client
                client = True
            connection = self._open(logged.conn, client, logged.version)
        return connection

    def _open(self, label: str, client: bool, version: str = "1.0") -> _Connection:
        """A new connection under the logger's `label` (a reused label starts a new one)."""
        old = self.connections.pop(label, None)
        if old is not None:
            self._forget(old)
        while len(self.connections) >= MAX_CONNECTIONS:  # a router's log of days: the oldest
            self._forget(self.connections.pop(next(iter(self.connections))))
        self.count += 1
        connection = _Connection(
            self.count, label, client, self.show_secrets, self.messages, version, self.redact_bodies
        )
        self.connections[label] = connection
        return connection

    def _forget(self, connection: _Connection) -> None:
        """A connection no line will name again: its deliveries left incomplete are findings."""
        for decoder in connection.decoders.values():
            self.findings.extend(decoder.end())

    def _record(self, logged: Logged) -> k.Frame | None:
        if logged.kind == ACCEPTED:  # a new connection, the logger its server
            self._open(logged.conn, client=False)
            self.ends += 1
            return None
        connection = self._connection(logged)
        if logged.kind == EOS:
            connection.ended.add(logged.direction)
            self.ends += 1
            return None
        direction = connection.direction(logged.direction)
        if logged.kind == HEADER:
            connection.headers.add((logged.direction, logged.protocol))
            frame = _header(_HEADER_BYTES[logged.protocol])
        elif logged.kind == EMPTY:
            frame = k.Frame(logged.version, k.HEARTBEAT, k.HEARTBEAT, logged.channel, b"")
        elif logged.version != "1.0":
            frame = self._frame091(connection, logged, direction)
        else:
            frame = self._frame(connection, logged, direction)
        # as the frame may have shown it (a logger that received `sasl-mechanisms` is a client)
        frame.direction = connection.direction(logged.direction)
        frame.conn = connection.conn
        ts = logged.ts
        if ts == 0.0 and self.when:  # no time in the frame's text: its wrapper's, if it had one
            ts = timestamp(self.when)
        frame.ts = self.clock.place(ts)
        # the log names one end, the logger's (`0x55d2...`, `C3`); the other is its peer
        sender, receiver = (
            (connection.label, "peer") if logged.direction == SENT else ("peer", connection.label)
        )
        frame.src, frame.dst = sender, receiver
        return frame

    def _frame(self, connection: _Connection, logged: Logged, direction: str) -> k.Frame:
        if self.completions is not None:
            self.completions.complete(logged)
        early = logged.made
        value = logged.value
        made: tuple[str, dict[str, Any]] | None = None
        if early is not None and self.direct:  # made by the grammar (a line like one before)
            sasl = early.sasl
            made = early.name, early.fields
            what = early.name
        else:
            if early is not None:
                value = early.tree()
            if not isinstance(value, Described):
                raise LogSyntaxError(0, "a frame body is a described value")
            sasl = value.descriptor in _SASL_CODES or value.name in _SASL_NAMES
            what = str(value.name)
        if sasl and what == "sasl-mechanisms" and (logged.direction == SENT) == connection.client:
            # only a server offers mechanisms: the logger sent them, or received them (a log
            # without the headers before them, qpid-jms's FRAMES tracer, starts with this one)
            connection.client = logged.direction != SENT
            direction = connection.direction(logged.direction)
        if logged.channel is not None and logged.channel > 0xFFFF:
            raise LogSyntaxError(0, f"channel {logged.channel} is past 65535")
        payload = logged.payload or b""
        decoder = connection.decoders[direction]
        if made is None and self.direct:
            made = direct.performative(value, sasl)
        if (
            made is not None
            and (not payload or made[0] == "transfer")
            and isinstance(decoder, Decoder)
        ):
            name, fields = made
            kind = k.SASL if sasl else k.PERFORMATIVE
            frame = k.Frame("1.0", kind, name, None if sasl else logged.channel, b"")
            # where a transfer's payload would start, asked of transfers only
            head = (
                _Head(value if early is None else early.tree).size
                if name == "transfer"
                else _no_head
            )
            decoder.decoded(frame, name, fields, payload, head)
        else:  # the round trip: what the direct path does not read cleanly, findings and all
            if value is None and early is not None:
                value = early.tree()
            body = encode(value)
            ftype = TYPE_SASL if sasl else TYPE_AMQP
            frame = make_frame(frame_bytes(logged.channel or 0, ftype, body, payload))
            decoder.decode(frame)
            frame.data = b""
            if logged.channel is None and frame.kind != k.SASL:
                frame.channel = None  # the log does not show it (pyamqp)
        for name in logged.lossy:
            # a value the log shows without what it takes to read it: left out, not guessed
            # (the decoder put a field's spec default in its place: out with it too)
            frame.fields.pop(name, None)
            frame.findings.append(self._not_shown(what, name))
        if logged.payload is None and logged.payload_size:
            frame.findings.append(self._cut(logged.payload_size))
        return frame

    # The findings every frame of a log may carry (rhea's cut payloads and unshown states,
    # go-amqp's unshown payloads) are made once each: findings are frozen (the tracker places
    # a copy), and making one, or only its message, is a good part of a line's time.

    def _not_shown(self, what: str, name: str) -> Finding:
        """`log.not-shown` of field `name` of performative `what`."""
        key = (what, name)
        found = self.not_shown.get(key)
        if found is None:
            if len(self.not_shown) >= 4096:
                self.not_shown.clear()
            lost = f"{what} {name}: the log does not show it, so it is left out"
            found = self.not_shown[key] = finding("log.not-shown", lost)
        return found

    def _cut(self, size: int) -> Finding:
        """`log.truncated-payload` of a payload of `size` bytes."""
        found = self.cuts.get(size)
        if found is None:
            if len(self.cuts) >= 4096:
                self.cuts.clear()
            cut = f"the log shows {size} payload bytes cut short"
            found = self.cuts[size] = finding("log.truncated-payload", cut)
        return found

    def _frame091(self, connection: _Connection, logged: Logged, direction: str) -> k.Frame:
        """A 0-9-1 frame (pika's log): encoded as shown, decoded as the wire; what the log
        does not show is taken out of the record again."""
        shown = logged.value
        if not isinstance(shown, pika.Shown):
            raise LogSyntaxError(0, "a 0-9-1 frame body expected")
        data, missing = pika.frame_bytes(shown)
        frame = frames091.make_frame(data, logged.version)
        connection.decoders[direction].decode(frame)
        frame.data = b""
        for name in missing:
            frame.fields.pop(name, None)
        return frame


def _shown(logged: Logged) -> tuple[list[str], set[str]] | None:
    """The fields of a logged performative's composite, and those its text shows (None: not
    a described list of a composite the spec knows)."""
    value = logged.value
    if value is None and logged.made is not None:
        value = logged.made.tree()
    if not isinstance(value, Described) or not isinstance(value.value, list):
        return None
    composite = spec.COMPOSITES.get(value.descriptor) if isinstance(value.descriptor, int) else None
    if composite is None:
        composite = _BY_NAME.get(str(value.name))
    if composite is None:
        return None
    names = [f.name for f in composite.fields]
    shown = {
        name if name is not None else names[at] if at < len(names) else ""
        for at, (name, _) in enumerate(value.value)
    }
    return names, shown


def _only_shown(frame: k.Frame, shown: tuple[list[str], set[str]] | None) -> None:
    """Out of a truncated frame's fields, those its text did not reach: the decoder (and
    rhea's completions) put the spec's defaults in their place, which the log never showed."""
    if shown is not None:
        for name in shown[0]:
            if name not in shown[1]:
                frame.fields.pop(name, None)
    # a mandatory field the cut took is the log's loss, not the frame's (`log.cut-line` says so)
    frame.findings = [f for f in frame.findings if f.code != "amqp10.missing-mandatory"]


#: the spec's composites by name (a grammar that names a performative without its code)
_BY_NAME: Final = {c.name: c for c in spec.COMPOSITES.values()}


def _no_head() -> int:
    """`decoded` asks where the payload starts of a transfer only."""
    raise AssertionError("a payload's start asked of a frame that is no transfer")


class _Head:
    """The size of a logged frame's header and performative as the round trip encodes them:
    where its payload would start, which a damaged message's findings name. `value`: the
    performative's tree, or what reads it (a line the grammar made from its cache)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def size(self) -> int:
        value = self.value
        return 8 + len(encode(value() if callable(value) else value))


def _payload_cut(logged: Logged) -> bool:
    """A transfer whose payload the line shows shorter than its size (wrapped, or cut)."""
    return logged.payload is None and logged.payload_size > 0


def _may_go_on(text: str) -> bool:
    """Whether text that did not read has more brackets open than closed (or an odd number of
    quotes): a frame a wrap cut, worth joining with the next line (the join must read)."""
    opened = text.count("[") + text.count("{") + text.count("(")
    closed = text.count("]") + text.count("}") + text.count(")")
    return opened > closed or text.count('"') % 2 == 1


#: the shortest prefix a logger repeats on each piece of a line it split (`_repeated_prefix`)
_PREFIX_LEAST: Final = 8


def _repeated_prefix(text: str, line: str) -> int:
    """How much of `line`, the next piece of a frame's `text` that a logger split, is the
    logger's prefix again (a time, a host, a process, as journald writes each piece of a line
    past its `LineMax`): the two lines' common start, digits matching any digits (the time
    moves on), up to its last space, `|` or `:`; 0 when it is shorter than `_PREFIX_LEAST`."""
    size = min(len(text), len(line), 256)
    end = 0
    while end < size:
        a, b = text[end], line[end]
        if a != b and not (a.isdigit() and b.isdigit()):
            break
        end += 1
    while end > 0 and line[end - 1] not in " |:":
        end -= 1
    return end if end >= _PREFIX_LEAST else 0


def _header(raw: bytes) -> k.Frame:
    """A protocol header record as the codec makes one from the same 8 bytes."""
    header = detect.PROTOCOL_HEADERS.get(raw[4:8])
    version = header.version if header else "unknown"
    frame = k.Frame(version, k.PROTOCOL_HEADER, k.PROTOCOL_HEADER, None, b"")
    frame.fields = {
        "protocol": detect.header_name(raw),
        "protocol-id": raw[4],
        "major": raw[5],
        "minor": raw[6],
        "revision": raw[7],
    }
    return frame


def records_from_log(
    lines: Iterable[str],
    name: str,
    fmt: str = proton.NAME,
    show_secrets: bool = False,
    messages: bool = True,
    findings: list[Finding] | None = None,
) -> Iterator[k.Frame]:
    """Frame records from the text lines of a log (each with its newline), sans-IO: the lines
    may come from a file, a pipe or a Spark partition. Findings no frame carries go to
    `findings` when given."""
    reader = LogReader(name, fmt, show_secrets=show_secrets, messages=messages)
    for number, line in enumerate(lines, 1):
        yield from reader.feed(line, number)
    yield from reader.flush()
    reader.finish()
    if findings is not None:
        findings.extend(reader.findings)
