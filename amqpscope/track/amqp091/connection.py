"""One 0-9-1 (or 0-8/0-9) connection's state, fed its frames in capture order (sans-IO).

The connection's and channels' states move by the tables of `rules.py`; what a method does to an
active channel is `channel.METHODS`; what a channel-0 method records is `CONNECTION_METHODS`
below. `feed()` does dict lookups and arithmetic only: it runs for every frame of a capture.

Also kept here: the handshake (products, mechanism and user, never the password; vhost), the
tune negotiation, blocked periods, and the silence on each direction against the negotiated
heartbeat interval. Channel numbers reused after close-ok start a new epoch (a new summary entry).
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.amqp091 import peerprops
from amqpscope.codec.frames import CONTENT_HEADER, HEARTBEAT, METHOD, PROTOCOL_HEADER, Frame
from amqpscope.findings import LOSSES, Finding, finding, gap_lost
from amqpscope.track.amqp091 import rules
from amqpscope.track.amqp091.channel import COUNTS, METHODS, ChannelEpoch, close_info
from amqpscope.track.transport import transport_summary, transport_text

C2S: Final = rules.C2S
S2C: Final = rules.S2C
#: channel epochs listed per connection; later ones are tracked while open, then only counted
MAX_EPOCHS: Final = 4096
#: blocked periods and heartbeat findings listed per connection
MAX_PERIODS: Final = 64
MAX_HEARTBEAT_FINDINGS: Final = 8
#: server-side holes remembered per connection (`s2c_holes`)
MAX_HOLES: Final = 256
#: the product fields shown from connection.start / start-ok properties
PRODUCT_KEYS: Final = ("product", "version", "platform", "cluster_name", "connection_name")
TUNE_KEYS: Final = ("channel-max", "frame-max", "heartbeat")


def _product(properties: Any) -> dict[str, Any] | None:
    if not isinstance(properties, dict):
        return None
    properties = peerprops.well_typed(properties)  # what is of another type is a finding
    return {key.replace("_", "-"): properties[key] for key in PRODUCT_KEYS if key in properties}


class ConnectionTracker:
    """Frames of one connection in; state, and findings about what the frames mean, out."""

    def __init__(
        self, conn: int, client: str, server: str, version: str, source: str = "capture"
    ) -> None:
        self.conn = conn
        self.source = source  # what findings call the frames' source: "capture", "log"
        self.client = client
        self.server = server
        self.version = version
        self.state = rules.AWAIT_HEADER
        self.from_start: bool | None = None  # decided by the first frame
        self.frames = 0
        self.first_ts = 0.0
        self.last_ts = 0.0
        # the handshake
        self.server_product: dict[str, Any] | None = None
        self.client_product: dict[str, Any] | None = None
        self.mechanisms: Any = None
        self.mechanism: Any = None
        self.user: Any = None
        self.vhost: Any = None
        self.proposed: dict[str, Any] | None = None  # connection.tune
        self.tuned: dict[str, Any] | None = None  # connection.tune-ok: what holds
        self.heartbeat = 0  # negotiated interval, seconds (0: off)
        self.close: dict[str, Any] | None = None
        # liveness, per direction
        # each direction's last frame and longest silence, as attributes (not dicts keyed by
        # direction: read and written for every frame, compiled they are native floats)
        self.last_c2s = 0.0
        self.last_s2c = 0.0
        self.gap_c2s = 0.0
        self.gap_s2c = 0.0
        self.heartbeats = {C2S: 0, S2C: 0}
        self.late = {C2S: 0, S2C: 0}  # silences longer than the interval
        self.missed = {C2S: 0, S2C: 0}  # silences longer than two intervals
        # blocked periods
        self.blocked_since: float | None = None
        self.blocked_reason: Any = None
        self.blocked_frame = 0
        self.blocked: list[dict[str, Any]] = []
        self.blocked_seconds = 0.0
        self.blocked_count = 0
        # channels
        self.channels: dict[int, ChannelEpoch] = {}  # number -> its current epoch
        self.epochs: list[ChannelEpoch] = []  # listed epochs, in the order they began
        self.uses: dict[int, int] = {}  # number -> epochs begun
        self.unlisted: dict[str, int] = dict.fromkeys(COUNTS, 0)  # ended epochs not listed
        self.unlisted_epochs = 0
        self.unexpected = 0
        # after connection.close-ok: its frame, and the state each channel was in then
        self.closed_frame = 0
        self.closed_channels: dict[int, str] = {}
        #: direction -> the frame of that side's own connection.close: it may send nothing after
        #: it but connection.close-ok (a second close, a method: its breach)
        self.own_close: dict[str, int] = {}
        #: channel -> (the client's last frame on it after the server's channel.close, that
        #: close's frame): frames in flight, which the server must discard until close-ok
        self.in_flight: dict[int, tuple[int, int]] = {}
        #: (channel, in-flight frame, the server's channel.close) a server's connection.close
        #: came on: not the client's error (`diagnose` says so)
        self.close_in_flight: tuple[int, int, int] | None = None
        self.transport_end: dict[str, Any] | None = None  # the `transport` record's fields
        self.transport_ts: float | None = None  # when the TCP connection first ended
        self.dropped = False  # TCP ended while the AMQP connection was open (transport-closed)
        # when each direction last lost bytes (a `tcp.gap` on its frame; -1.0: never): what it
        # sent after a time before that is "not seen" rather than "never sent"
        self.lost_c2s = -1.0
        self.lost_s2c = -1.0
        # the capture lost bytes of this connection: a method whose cause may be in them (a
        # handshake step, an ack of a delivery lost) is adopted, not flagged
        self.lenient = False
        # (from, to): times between which the server sent bytes the capture lost, learnt only
        # at its next frame (to) after frames of the client's already read; what the client
        # said meanwhile (an ack of a delivery in them) may answer them. The first MAX_HOLES
        self.s2c_holes: list[tuple[float, float]] = []

    # -- frames in ------------------------------------------------------------------------------
    def feed(self, frame: Frame, out: list[Finding] | None = None) -> list[Finding]:
        """Apply one frame; return the findings it raises (the caller puts them on the frame),
        appended to `out` when given (a caller's list, reused: no list made per frame)."""
        if out is None:
            out = []
        direction = frame.direction
        ts = frame.ts
        if self.from_start is None:
            self._begin(frame, out)
        self.frames += 1
        self.last_ts = ts
        if direction == C2S:
            last = self.last_c2s
            self.last_c2s = ts
        else:
            last = self.last_s2c
            self.last_s2c = ts
        if last and self.heartbeat and self.state in rules.CONNECTION_LIVE:
            self._silence(direction, ts - last, out)
        if frame.findings:
            self._lost(frame, last)
        kind = frame.kind
        if self.own_close and kind != HEARTBEAT:
            own = self.own_close.get(direction)
            # a channel's frame once the connection closed is amqp091.frame-after-close alone
            # (_after_close): one finding a frame
            after_close_ok = self.state == rules.CLOSED and bool(frame.channel)
            if own and frame.name != "connection.close-ok" and not after_close_ok:
                self._after_own_close(frame, direction, own, out)
        if kind == METHOD:
            if frame.channel:
                self._channel(frame, direction, out)
            else:
                self._connection(frame, direction, out)
        elif kind == HEARTBEAT:
            self.heartbeats[direction] += 1
        elif kind == PROTOCOL_HEADER:
            self._connection(frame, direction, out)
        elif frame.channel:  # content header or body
            epoch = self.channels.get(frame.channel)
            if epoch is not None:
                if epoch.state in rules.CHANNEL_ACTIVE:
                    if kind == CONTENT_HEADER:
                        epoch.content_header(frame, direction)
                else:
                    self._discard(epoch, frame, direction)
        return out

    def _discard(self, epoch: ChannelEpoch, frame: Frame, direction: str) -> None:
        """A frame in flight while its channel closes: its peer drops it. The client's, after
        the server's channel.close, is remembered: a connection.close on it is the server's."""
        epoch.discarded += 1
        if direction == C2S and epoch.state == rules.CH_CLOSING_BY_SERVER and epoch.close:
            self.in_flight[epoch.number] = (frame.number, epoch.close.get("frame") or 0)

    def _refused_content(self, epoch: ChannelEpoch, close: Frame) -> None:
        """The server's channel.close refused a basic.publish whose content the client had sent
        already (py-amqp writes method, header and body at once): that content reaches the
        server after its close, and it must discard it as it discards any frame in flight
        (garagemq closes the connection with 501 instead)."""
        refused = (epoch.close or {}).get("class-method") == "basic.publish"
        if refused and epoch.header_frame > epoch.publish_frame > 0:
            self.in_flight.setdefault(epoch.number, (epoch.header_frame, close.number))

    def _after_own_close(self, frame: Frame, direction: str, own: int, out: list[Finding]) -> None:
        who = "client" if direction == C2S else "server"
        self.unexpected += 1
        out.append(
            finding(
                "amqp091.sent-after-close",
                f"{frame.name} on channel {frame.channel or 0} from the {who} after its own"
                f" connection.close (frame {own})",
            )
        )

    def _begin(self, frame: Frame, out: list[Finding]) -> None:
        self.first_ts = frame.ts
        self.from_start = frame.kind == PROTOCOL_HEADER
        self.state = rules.connection_first(self.from_start)
        if not self.from_start:
            source = self.source
            seen = "was not captured" if source == "capture" else f"is not in the {source}"
            out.append(
                finding(
                    "amqp091.mid-stream",
                    f"the {source} starts inside this connection: its handshake (products, user,"
                    f" vhost, tune and heartbeat) {seen}, and channels, consumers and"
                    " delivery tags already in use are adopted as they first show up (acks of"
                    f" deliveries from before the {source} are counted, not checked)",
                )
            )

    def _silence(self, direction: str, gap: float, out: list[Finding]) -> None:
        if direction == C2S:
            if gap > self.gap_c2s:
                self.gap_c2s = gap
        elif gap > self.gap_s2c:
            self.gap_s2c = gap
        interval = self.heartbeat
        if gap <= interval:
            return
        self.late[direction] += 1
        if gap <= 2 * interval:
            return
        self.missed[direction] += 1
        if self.missed[direction] <= MAX_HEARTBEAT_FINDINGS:
            who = "client" if direction == C2S else "server"
            out.append(
                finding(
                    "amqp091.heartbeat-missed",
                    f"the {who} sent nothing for {gap:.3f} s, over twice the negotiated heartbeat"
                    f" of {interval} s (its peer may consider the connection dead)",
                )
            )

    # -- channel 0 ------------------------------------------------------------------------------
    def _lost(self, frame: Frame, last: float) -> None:
        """A `tcp.gap` on the frame: the direction it names lost bytes just before it (`last`:
        when the frame's direction sent its previous frame)."""
        for f in frame.findings:
            if f.code not in LOSSES:
                continue
            _missing, lost = gap_lost(f, frame.direction)
            if lost == C2S:
                self.lost_c2s = frame.ts
            else:
                self.lost_s2c = frame.ts
                if frame.direction == S2C and len(self.s2c_holes) < MAX_HOLES:
                    self.s2c_holes.append((last, frame.ts))
            self.lenient = True
            for epoch in self.channels.values():
                epoch.bytes_lost(lost or frame.direction)

    def _connection(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        name = frame.name
        state = self.state
        after, unexpected = rules.connection_step(
            state, (direction, name), bool(self.from_start), self.lenient
        )
        if unexpected:
            self.unexpected += 1
            out.append(
                finding(
                    "amqp091.unexpected-method",
                    f"{name} from the {'client' if direction == C2S else 'server'} while the"
                    f" connection is {state}",
                )
            )
        handler = CONNECTION_METHODS.get(name)
        if handler is not None:
            handler(self, frame, direction, out)
        if after is not None:
            self.state = after
            if after == rules.CLOSED:
                self.closed_frame = frame.number
                self.closed_channels = {n: e.state for n, e in self.channels.items()}
                self._end_channels(frame.ts, "connection", out)

    def _start(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        fields = frame.fields
        self.server_product = _product(fields.get("server-properties"))
        self.mechanisms = fields.get("mechanisms")

    def _start_ok(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        fields = frame.fields
        self.client_product = _product(fields.get("client-properties"))
        self.mechanism = fields.get("mechanism")
        user = fields.get("user")
        self.user = user if type(user) is str else None  # the decoder gives only text

    def unoffered_mechanism(self) -> str | None:
        """The mechanism the client's start-ok chose when the broker's connection.start did not
        offer it (its `mechanisms`, space-separated, must hold the client's choice: AMQP 0-9-1
        connection.start-ok); None when it was offered or either side was not seen.

        Why: php-amqplib logs in with AMQPLAIN unless told otherwise; a broker that offers PLAIN
        alone (garagemq) refuses it, and the refusal is about the mechanism, not the password."""
        offered, chosen = self.mechanisms, self.mechanism
        if isinstance(offered, bytes):
            offered = offered.decode("latin-1")
        if not isinstance(offered, str) or not isinstance(chosen, str) or not chosen:
            return None
        return None if chosen in offered.split() else chosen

    def _unoffered_note(self) -> str:
        """What a refused login's finding adds when the client chose a mechanism not offered."""
        chosen = self.unoffered_mechanism()
        if chosen is None:
            return ""
        return f"; the client chose {chosen}, which the broker did not offer ({self.mechanisms})"

    def _tune(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        self.proposed = {key: frame.fields.get(key) for key in TUNE_KEYS}

    def _tune_ok(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        self.tuned = {key: frame.fields.get(key) for key in TUNE_KEYS}
        heartbeat = self.tuned["heartbeat"]
        self.heartbeat = heartbeat if isinstance(heartbeat, int) else 0

    def _open(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        self.vhost = frame.fields.get("virtual-host")

    def _close(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        self.own_close.setdefault(direction, frame.number)
        if self.close is not None:
            return
        by = "client" if direction == C2S else "server"
        self.close = info = close_info(frame, by)
        if by == "server":
            for epoch in self.channels.values():
                epoch.asked.clear()  # the broker's close is its answer to what was waiting
        code = info["reply-code"]
        if code in rules.OK_CODES or code is None:
            return
        text = info["reply-text"]
        if by == "server" and (
            self.state in rules.LOGIN_VERDICT
            or (self.state in rules.CONNECTION_LOGIN and code in rules.LOGIN_REFUSED)
        ):
            out.append(
                finding(
                    "amqp091.login-refused",
                    f"the broker refused the login of user {self.user!r} ({self.mechanism}):"
                    f" {code} {text}" + self._unoffered_note(),
                )
            )
            return
        failed = f" in reply to {info['class-method']}" if info["class-method"] else ""
        if by == "server" and self.in_flight and not failed:
            channel, (sent, closed) = max(self.in_flight.items(), key=lambda i: i[1][0])
            self.close_in_flight = (channel, sent, closed)
            failed = (
                f" on frame {sent}, which the client sent on channel {channel} after the server's"
                f" channel.close (frame {closed}) and before its close-ok: in flight"
                if sent > closed
                else f" on frame {sent}, the content of the basic.publish the server's"
                f" channel.close (frame {closed}) refused on channel {channel}: to be discarded"
                " with it"
            )
        out.append(
            finding(
                "amqp091.connection-error",
                f"the connection was closed by the {by}{failed}: {code} {text}",
            )
        )

    def _blocked(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        if self.blocked_since is not None:
            return
        self.blocked_since = frame.ts
        self.blocked_reason = frame.fields.get("reason")
        self.blocked_frame = frame.number
        self.blocked_count += 1
        out.append(
            finding(
                "amqp091.blocked",
                f"the broker blocked this connection's publishing: {self.blocked_reason}",
            )
        )

    def _unblocked(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        self._unblock(frame.ts, frame.number)

    def _unblock(self, ts: float, number: int | None) -> None:
        if self.blocked_since is None:
            return
        seconds = max(0.0, ts - self.blocked_since)
        self.blocked_seconds += seconds
        if len(self.blocked) < MAX_PERIODS:
            self.blocked.append(
                {
                    "reason": self.blocked_reason,
                    "frame": self.blocked_frame,
                    "unblocked-frame": number,
                    "seconds": round(seconds, 6),
                }
            )
        self.blocked_since = None

    # -- channels -------------------------------------------------------------------------------
    def _channel(self, frame: Frame, direction: str, out: list[Finding]) -> None:
        number = frame.channel
        assert number is not None  # feed() sends only frames on a non-zero channel here
        name = frame.name
        if self.state == rules.CLOSED:
            self._after_close(frame, number, out)
            return
        epoch = self.channels.get(number)
        if epoch is None:
            if direction == C2S and name == "channel.open":
                epoch = self._new_epoch(number, frame, True)
            else:
                if (
                    self.from_start
                    and not self.lenient
                    and self.state not in (rules.CLOSING, rules.CLOSED)
                ):
                    self.unexpected += 1
                    out.append(
                        finding(
                            "amqp091.unexpected-method",
                            f"{name} on channel {number}, which is not open",
                        )
                    )
                epoch = self._new_epoch(number, frame, False)
        # synchronous requests and their answers, whatever the channel's state (an answer in
        # flight while the client closes the channel still answers)
        if direction == S2C:
            if name in rules.ANSWERS:
                epoch.answer(name)
        elif name in rules.REPLIES and epoch.state in rules.CHANNEL_ACTIVE:
            epoch.ask(frame)  # (sent into a closing channel, it is discarded unanswered)
        state = epoch.state
        # only the channel class's own methods move its state (`rules.channel_step`: no key made
        # and hashed for the methods of every message)
        after = rules.channel_step(state, direction, name)
        if after is not None:
            if name == "channel.close":
                epoch.closing(frame, "client" if direction == C2S else "server", out)
                if direction == S2C:
                    self._refused_content(epoch, frame)
            epoch.state = after
            if after == rules.CH_CLOSED:
                epoch.end(frame.ts, "closed", out, self.lost_c2s, self.lost_s2c)
                self._ended(epoch)
            return
        if state in rules.CHANNEL_ACTIVE:
            # the methods of every message, called by name (compiled, a direct C call); the
            # rest through the table, as these are too
            if direction == C2S and name == "basic.publish":
                epoch.publish(frame, out)
                return
            if direction == S2C and name == "basic.deliver":
                epoch.deliver(frame, out)
                return
            if direction == C2S and name == "basic.ack":
                epoch.client_settles(frame, out)
                return
            handler = METHODS.get((direction, name))
            if handler is not None:
                handler(epoch, frame, out)
            elif name.startswith("channel.") and name != "channel.flow-ok":
                if not epoch.from_start or epoch.lenient:
                    # adopted mid-stream (a capture started late, a log showing one side) or
                    # after lost bytes: the frame that explains this one may not be in the input
                    adopted = rules.channel_adopted_step(state, name)
                    if adopted is not None:
                        epoch.state = adopted
                        if adopted == rules.CH_CLOSED:
                            epoch.end(frame.ts, "closed", out, self.lost_c2s, self.lost_s2c)
                            self._ended(epoch)
                    return
                self.unexpected += 1
                out.append(
                    finding(
                        "amqp091.unexpected-method",
                        f"{name} on channel {number} while it is {state}",
                    )
                )
        else:
            self._discard(epoch, frame, direction)  # in flight while the channel closes

    def _after_close(self, frame: Frame, number: int, out: list[Finding]) -> None:
        """A channel's frame after connection.close-ok: no channel lives on a closed connection
        (none is made for it); the finding says what was tracked, the channel's state when the
        connection closed."""
        self.unexpected += 1
        was = self.closed_channels.get(number)
        which = f"channel {number}" + (f" ({was} when it did)" if was else "")
        out.append(
            finding(
                "amqp091.frame-after-close",
                f"{frame.name} on {which} after the connection closed"
                f" (connection.close-ok, frame {self.closed_frame})",
            )
        )

    def _new_epoch(self, number: int, frame: Frame, from_start: bool) -> ChannelEpoch:
        use = self.uses.get(number, 0) + 1
        self.uses[number] = use
        epoch = ChannelEpoch(number, use, frame, from_start, self.source)
        if len(self.epochs) < MAX_EPOCHS:
            self.epochs.append(epoch)
        else:
            epoch.listed = False
        self.channels[number] = epoch
        return epoch

    def _ended(self, epoch: ChannelEpoch) -> None:
        if self.channels.get(epoch.number) is epoch:
            del self.channels[epoch.number]
        if not epoch.listed:
            self.unlisted_epochs += 1
            for key, value in epoch.counts().items():
                self.unlisted[key] += value

    def _end_channels(self, ts: float, why: str, out: list[Finding]) -> None:
        for epoch in list(self.channels.values()):
            epoch.end(ts, why, out, self.lost_c2s, self.lost_s2c)
            self._ended(epoch)

    # -- the end --------------------------------------------------------------------------------
    def transport(self, frame: Frame, gone: bool = True) -> list[Finding]:
        """The TCP connection ended (a `transport` record: fin, rst or idle; the first one says
        who ended it first). While the AMQP connection was open (tuned, opening or open: no
        connection.close sent) this is `amqp091.transport-closed`: the client vanished, was
        killed, or the broker dropped it. A close sent without its close-ok, a refused login and
        a handshake cut short are not: the summary says so by their state. Channels still open
        end once the client is `gone` (its FIN, a reset, the second FIN: after the broker's FIN the
        client may still send, not knowing), with "when the TCP connection ended", so
        `finish` reports them no second time."""
        out: list[Finding] = []
        if self.transport_end is not None:
            if gone:
                self._end_channels(frame.ts, "transport", out)
                self._unblock(frame.ts, None)
            return out
        fields = frame.fields
        self.transport_end = {"event": fields.get("event"), "by": fields.get("by")}
        self.transport_ts = frame.ts
        if self.state in (rules.TUNED, rules.OPENING, rules.OPEN):
            self.dropped = True
            channels = list(self.channels.values())
            unacked = sum(len(e.outstanding) for e in channels)
            unconfirmed = sum(len(e.unconfirmed) for e in channels)
            left = f"{len(channels)} channel{'' if len(channels) == 1 else 's'} still open"
            if unacked:
                left += f", {unacked} deliveries unacked"
            if unconfirmed:
                left += f", {unconfirmed} publishes unconfirmed"
            out.append(
                finding(
                    "amqp091.transport-closed",
                    f"{transport_text(fields)} while the AMQP connection was {self.state}"
                    f" (no connection.close): {left}",
                )
            )
        if gone:
            self._end_channels(frame.ts, "transport", out)
            self._unblock(frame.ts, None)  # blocked until the TCP end, not its last frame
        return out

    def finish(self) -> list[Finding]:
        """The capture ended: findings for what was left open (unacked, unconfirmed, ...)."""
        out: list[Finding] = []
        self._end_channels(self.last_ts, "capture", out)
        self._unblock(self.last_ts, None)
        return out

    def summary(self) -> dict[str, Any]:
        """The connection as `amqpscope summary --json` shows it."""
        listed = list(self.epochs)
        listed += [e for e in self.channels.values() if not e.listed]
        totals = dict(self.unlisted)
        for epoch in listed:
            for key, value in epoch.counts().items():
                totals[key] += value
        out: dict[str, Any] = {
            "id": self.conn,
            "version": self.version,
            "client": self.client,
            "server": self.server,
            "state": self.state,
            "from-start": bool(self.from_start),
            "vhost": self.vhost,
            "user": self.user,
            "mechanism": self.mechanism,
            "server-product": self.server_product,
            "client-product": self.client_product,
            "tune": None,
            "heartbeat": None,
            "blocked": None,
            "close": self.close,
            "transport": transport_summary(self.transport_end),
            "dropped": self.dropped,
            "duration-s": round(self.last_ts - self.first_ts, 6),
            "frames": self.frames,
            "totals": totals,
            "channels": [e.to_json() for e in listed],
        }
        if self.tuned is not None or self.proposed is not None:
            out["tune"] = {"negotiated": self.tuned, "proposed": self.proposed}
        if self.heartbeat or self.heartbeats[C2S] or self.heartbeats[S2C]:
            out["heartbeat"] = {
                "interval-s": self.heartbeat,
                "frames": dict(self.heartbeats),
                "max-silence-s": {C2S: round(self.gap_c2s, 6), S2C: round(self.gap_s2c, 6)},
                "late": dict(self.late),
                "missed": dict(self.missed),
            }
        if self.blocked_count:
            out["blocked"] = {
                "times": self.blocked_count,
                "seconds": round(self.blocked_seconds, 6),
                "periods": self.blocked,
            }
        if self.unlisted_epochs:
            out["channels-unlisted"] = self.unlisted_epochs
        if self.unexpected:
            out["unexpected-methods"] = self.unexpected
        return out


#: channel-0 method -> what it records (its state change is `rules.CONNECTION_TRANSITIONS`)
CONNECTION_METHODS: Final = {
    "connection.start": ConnectionTracker._start,
    "connection.start-ok": ConnectionTracker._start_ok,
    "connection.tune": ConnectionTracker._tune,
    "connection.tune-ok": ConnectionTracker._tune_ok,
    "connection.open": ConnectionTracker._open,
    "connection.close": ConnectionTracker._close,
    "connection.blocked": ConnectionTracker._blocked,
    "connection.unblocked": ConnectionTracker._unblocked,
}
