"""AMQP 1.0 field decoding: fills `fields` (and `message`) of the frames of one direction.

One `Decoder` per connection direction: it keeps what spans frames. That is all in this
direction: a peer attaches its links and sends their transfers the same way, so links and
deliveries are keyed by (channel, handle) as this peer numbers them.

- Every performative and SASL frame: `fields` from the composite tables (composites.py).
- transfer: the payload after the performative is a delivery's next bytes. A delivery ends with
  the first transfer whose `more` is false; that frame carries `message`. An aborted transfer
  drops the delivery (a finding); a transfer of another delivery id on a handle with one in
  progress, a detach or an end leaves the old one incomplete (a finding).
- attach: remembered per (channel, handle), so that messages on `$cbs` / `$management` links are
  recognised; detach and end forget.
- sasl-init / sasl-response: credentials are redacted unless `show_secrets`.
- `redact_bodies`: message bodies keep their kind and size only (message.py).
- `messages=False` (`summary`, which shows no message): a delivery's transfers are followed and
  counted, its message is not decoded, so damage inside message sections is a finding of `read`
  only. Transaction coordinator links (the tracker reads their declares and discharges) and
  links whose attach was not seen are still decoded.

It never raises: damage becomes findings on the frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from amqpscope.codec.amqp10 import composites
from amqpscope.codec.amqp10.jsonmap import REDACTED
from amqpscope.codec.amqp10.message import Link, decode_message, link_of
from amqpscope.codec.amqp10.types import Context
from amqpscope.codec.frames import PERFORMATIVE, SASL, Frame
from amqpscope.findings import Finding, finding

#: payload bytes a delivery in progress may hold; beyond it the message is counted, not kept
MAX_DELIVERY: Final = 64 * 1024 * 1024
#: SASL mechanisms whose initial response carries no secret (trace text, an authorization id)
OPEN_MECHANISMS: Final = frozenset(("ANONYMOUS", "EXTERNAL"))


class _Delivery:
    """A delivery whose transfers are still arriving."""

    __slots__ = (
        "chunks",
        "delivery_id",
        "first",
        "fmt",
        "frames",
        "kept",
        "partial",
        "size",
        "tag",
    )

    def __init__(self, fields: dict[str, Any], first: Frame) -> None:
        self.delivery_id = fields.get("delivery-id")
        self.tag = fields.get("delivery-tag")
        self.fmt = fields.get("message-format")
        self.first = first
        self.chunks: list[bytes] = []
        self.size = 0
        self.frames = 0
        self.kept = True
        self.partial = False  # its first transfers were lost (or before the capture)

    def add(self, chunk: bytes) -> None:
        self.frames += 1
        self.size += len(chunk)
        if self.kept and self.size > MAX_DELIVERY:
            self.kept = False
            self.chunks.clear()
        if self.kept and chunk:
            self.chunks.append(chunk)

    def describe(self) -> str:
        return (
            f"delivery {self.delivery_id} ({self.frames} transfers, {self.size} bytes, "
            f"first in packet {self.first.packet})"
        )


class Decoder:
    version = "1.0"  # what the framer checks to know this decoder still fits

    def __init__(
        self, show_secrets: bool = False, messages: bool = True, redact_bodies: bool = False
    ) -> None:
        self.show_secrets = show_secrets
        self.redact_bodies = redact_bodies
        # False: deliveries are followed but their messages are not decoded (`summary` needs
        # none), except on transaction coordinator links and links whose attach was not seen
        self.messages = messages
        self.links: dict[tuple[int | None, int], Link] = {}
        # the last (channel, handle) looked up in `links` and what it found (`_link`): a link's
        # transfers come in runs; `link_known` False: none kept (`links` changed since)
        self.link_channel: int | None = None
        self.link_handle = 0
        self.link_found: Link | None = None
        self.link_known = False
        self.deliveries: dict[tuple[int | None, int], _Delivery] = {}
        # after bytes were lost (or a capture that started mid-stream): the links (channel,
        # handle) that have begun a delivery since (None: no loss). On any other, a transfer
        # that starts no message section may be the rest of one begun in the lost bytes
        self.since_gap: set[tuple[int | None, int]] | None = None
        self.mechanism: str | None = None

    def decode(self, frame: Frame) -> None:
        """Fill `frame.fields` (and `frame.message` on a delivery's last transfer)."""
        if frame.kind != PERFORMATIVE and frame.kind != SASL:
            return  # protocol headers are decoded by framing; heartbeats are empty
        ctx = Context(frame.data)
        buf = ctx.buf
        name, fields, pos = composites.decode_body(ctx, buf[4] * 4, len(buf))
        frame.fields = fields  # as on the wire
        if ctx.findings and name is not None and _ill_typed(ctx.findings):
            fields = composites.well_typed(name, fields)  # what the bookkeeping computes with
        if name == "transfer":  # most frames: called by name, compiled a direct C call
            self._transfer(frame, fields, buf, pos, ctx.findings, None, ctx)
            if ctx.findings:
                frame.findings.extend(ctx.findings)
            return
        after = _AFTER.get(name) if name is not None else None
        if after is not None:
            after(self, frame, fields, buf, pos, ctx.findings)
        elif pos < len(buf):
            what = f"{len(buf) - pos} bytes after the {name or frame.name}"
            ctx.note("amqp10.trailing-bytes", pos, what)
        if ctx.findings:
            frame.findings.extend(ctx.findings)

    def decoded(
        self,
        frame: Frame,
        name: str,
        fields: dict[str, Any],
        payload: bytes,
        head: Callable[[], int],
    ) -> None:
        """What `decode` does after the composite, for a frame whose fields were made in the
        wire's shapes without bytes (a log's, `logs/direct.py`: only fields that decode without
        a finding). `payload`: the transfer's payload; `head()`: where it would start in the
        frame's bytes, asked only when a message's findings name offsets."""
        frame.fields = fields
        notes: list[Finding] = []
        if name == "transfer":
            self._transfer(frame, fields, payload, 0, notes, head)
        else:
            after = _AFTER.get(name)
            if after is not None:
                after(self, frame, fields, payload, 0, notes)
        if notes:
            frame.findings.extend(notes)

    def end(self) -> list[Finding]:
        """The direction ended: findings for deliveries left incomplete."""
        out = [
            finding(
                "amqp10.incomplete-delivery",
                f"{d.describe()} on channel {key[0]} handle {key[1]} never completed",
                d.first.packet,
            )
            for key, d in self.deliveries.items()
        ]
        self.deliveries.clear()
        return out

    def gap(self) -> None:
        """Bytes were lost: deliveries in progress cannot complete (the gap itself is reported
        on the next frame), so they are dropped; their later transfers, if any, are counted
        as the rest of a message whose start is not known, not read as a message."""
        self.deliveries.clear()
        self.since_gap = set()

    def _partial(self, key: tuple[int | None, int], buf: bytes, pos: int, end: int) -> bool:
        """A delivery starting on link `key` after a loss is the rest of one begun before it:
        its payload does not start with a section (a described type, byte 0x00)."""
        since = self.since_gap
        if since is None or key in since:
            return False
        since.add(key)
        return pos < end and buf[pos] != 0

    # -- per performative ---------------------------------------------------------------------
    def _transfer(
        self,
        frame: Frame,
        fields: dict,
        buf: bytes,
        pos: int,
        notes: list[Finding],
        head: Callable[[], int] | None = None,
        ctx: Context | None = None,
    ) -> None:
        """`ctx`: the frame's decoding pass, whose findings `notes` are (`decode`); a message
        the frame holds whole goes on with it (`decode_message`)."""
        handle = fields.get("handle")
        if type(handle) is not int:
            return
        key = (frame.channel, handle)
        # most transfers are a whole delivery: no delivery in progress anywhere to look up
        delivery = self.deliveries.get(key) if self.deliveries else None
        delivery_id = fields.get("delivery-id")
        if delivery is not None and delivery_id is not None and delivery_id != delivery.delivery_id:
            notes.append(
                finding(
                    "amqp10.incomplete-delivery",
                    f"{delivery.describe()} never completed: delivery {delivery_id} followed",
                )
            )
            del self.deliveries[key]
            delivery = None
        if fields.get("aborted") is True:
            if delivery is not None:
                del self.deliveries[key]
                what = delivery.describe()
            else:
                what = f"delivery {delivery_id}"
            notes.append(finding("amqp10.aborted-transfer", f"{what} aborted, payload dropped"))
            return
        end = len(buf)
        more = fields.get("more") is True
        if not self.messages:
            link = self._link(key)
            if link is not None and not link.coordinator:
                self._count(key, delivery, fields, frame, end - pos, more)
                return
        if delivery is None and self.since_gap is not None and self._partial(key, buf, pos, end):
            delivery = self.deliveries[key] = _Delivery(fields, frame)
            delivery.kept = False
            delivery.partial = True
        if delivery is None:
            if not more:
                if pos < end:  # the whole delivery in one frame: decoded where it lies
                    meta = {
                        "delivery-id": delivery_id,
                        "delivery-tag": fields.get("delivery-tag"),
                        "transfers": 1,
                    }
                    fmt = fields.get("message-format")
                    self._message(frame, key, meta, fmt, buf, pos, end, notes, head, ctx)
                return
            delivery = self.deliveries[key] = _Delivery(fields, frame)
        delivery.add(buf[pos:end])
        if more:
            return
        del self.deliveries[key]
        if not delivery.kept:
            frame.message = _meta(delivery) | {"size": delivery.size, "truncated": True}
            if not delivery.partial:
                notes.append(
                    finding("amqp10.bad-message", f"{delivery.describe()}: too large to keep")
                )
            return
        payload = b"".join(delivery.chunks)
        meta = _meta(delivery)
        self._message(frame, key, meta, delivery.fmt, payload, 0, len(payload), notes)

    def _count(
        self,
        key: tuple[int | None, int],
        delivery: _Delivery | None,
        fields: dict,
        frame: Frame,
        size: int,
        more: bool,
    ) -> None:
        """A transfer whose message is not wanted: the delivery is followed (for the findings
        of one left incomplete), its bytes counted, not kept."""
        if delivery is None:
            if not more:
                return
            delivery = self.deliveries[key] = _Delivery(fields, frame)
            delivery.kept = False
        delivery.frames += 1
        delivery.size += size
        if not more:
            del self.deliveries[key]

    def _message(
        self,
        frame: Frame,
        key: tuple[int | None, int],
        meta: dict[str, Any],
        fmt: Any,
        buf: bytes,
        start: int,
        end: int,
        notes: list[Finding],
        head: Callable[[], int] | None = None,
        ctx: Context | None = None,
    ) -> None:
        """The delivery's message (`meta`: its id, tag and transfers; `key`: its channel and
        handle) is `buf[start:end]`; with `head`, `buf` is a logged transfer's payload, which
        `head()` bytes of frame header and performative would precede (the offsets its findings
        name); with `ctx`, `buf` is the frame's bytes and `ctx` its decoding pass, whose
        findings (`notes`) the message's join."""
        if not (fmt is None or fmt == 0):  # not the standard message format: bytes as they are
            if self.redact_bodies:
                frame.message = meta | {"size": end - start, "redacted": True}
            else:
                frame.message = meta | {"size": end - start, "hex": buf[start:end].hex()}
            return
        link = self._link(key)
        message, found = decode_message(
            buf,
            start,
            end,
            where="offset" if start or head is not None else "payload offset",
            link=link,
            show_secrets=self.show_secrets,
            redact_bodies=self.redact_bodies,
            into=meta if head is None else dict(meta),
            ctx=ctx if head is None else None,
        )
        if found and head is not None:  # offsets as they would be in the frame's bytes
            pad = head()
            message, found = decode_message(
                bytes(pad) + buf[start:end],
                pad,
                pad + end - start,
                where="offset",
                link=link,
                show_secrets=self.show_secrets,
                redact_bodies=self.redact_bodies,
                into=meta,
            )
        frame.message = message
        if found:
            notes.extend(found)

    def _link(self, key: tuple[int | None, int]) -> Link | None:
        """`links.get(key)`, the last answer kept: no tuple hashed and looked up per transfer
        of a run on one link (a channel is matched by identity, as small ints and None are
        shared: another channel number is looked up)."""
        channel, handle = key
        if self.link_known and handle == self.link_handle and channel is self.link_channel:
            return self.link_found
        link = self.links.get(key)
        self.link_channel = channel
        self.link_handle = handle
        self.link_found = link
        self.link_known = True
        return link

    def _attach(self, frame: Frame, fields: dict, buf: bytes, pos: int, notes: list) -> None:
        self.link_known = False
        handle = fields.get("handle")
        if type(handle) is int:
            self.links[(frame.channel, handle)] = link_of(fields)
        _trailing(buf, pos, "attach", notes)

    def _detach(self, frame: Frame, fields: dict, buf: bytes, pos: int, notes: list) -> None:
        self.link_known = False
        handle = fields.get("handle")
        self.links.pop((frame.channel, handle), None)  # type: ignore[arg-type]
        delivery = self.deliveries.pop((frame.channel, handle), None)  # type: ignore[arg-type]
        if delivery is not None:
            notes.append(_left(delivery, "the link was detached"))
        _trailing(buf, pos, "detach", notes)

    def _end(self, frame: Frame, fields: dict, buf: bytes, pos: int, notes: list) -> None:
        self.link_known = False
        for table in (self.links, self.deliveries):
            for key in [k for k in table if k[0] == frame.channel]:
                gone = table.pop(key)
                if isinstance(gone, _Delivery):
                    notes.append(_left(gone, "the session ended"))
        _trailing(buf, pos, "end", notes)

    def _sasl_init(self, frame: Frame, fields: dict, buf: bytes, pos: int, notes: list) -> None:
        mechanism = fields.get("mechanism")
        self.mechanism = mechanism if type(mechanism) is str else None
        self._redact(frame.fields, "initial-response")
        _trailing(buf, pos, "sasl-init", notes)

    def _sasl_response(self, frame: Frame, fields: dict, buf: bytes, pos: int, notes: list) -> None:
        self._redact(frame.fields, "response")
        _trailing(buf, pos, "sasl-response", notes)

    def _redact(self, fields: dict, name: str) -> None:
        """The response on the wire (`frame.fields`): a binary's secret, or a value of another
        type (which may hold one just the same), redacted unless `show_secrets`."""
        response = fields.get(name)
        if response is None or self.mechanism in OPEN_MECHANISMS:
            return
        if type(response) is str:
            fields[name] = self._credentials(response)
        elif not self.show_secrets:
            fields[name] = REDACTED

    def _credentials(self, hex_response: str) -> Any:
        """PLAIN (`authzid NUL user NUL password`) shows who; other mechanisms' responses (bearer
        tokens, AMQPLAIN tables, proofs) are shown only with show_secrets."""
        if self.mechanism == "PLAIN":
            parts = bytes.fromhex(hex_response).split(b"\0")
            if len(parts) == 3:
                authzid, user, password = (p.decode("utf-8", "backslashreplace") for p in parts)
                secret = password if self.show_secrets else REDACTED
                return {"authzid": authzid, "username": user, "password": secret}
        return hex_response if self.show_secrets else REDACTED


def _ill_typed(notes: list[Finding]) -> bool:
    return any(note.code in composites.TYPE_DAMAGE for note in notes)


def _meta(delivery: _Delivery) -> dict[str, Any]:
    return {
        "delivery-id": delivery.delivery_id,
        "delivery-tag": delivery.tag,
        "transfers": delivery.frames,
    }


def _left(delivery: _Delivery, why: str) -> Finding:
    return finding("amqp10.incomplete-delivery", f"{delivery.describe()} left incomplete: {why}")


def _trailing(buf: bytes, pos: int, name: str, notes: list[Finding]) -> None:
    if pos < len(buf):
        notes.append(
            finding("amqp10.trailing-bytes", f"{len(buf) - pos} bytes after the {name} at {pos}")
        )


_AFTER: Final = {
    "transfer": Decoder._transfer,
    "attach": Decoder._attach,
    "detach": Decoder._detach,
    "end": Decoder._end,
    "sasl-init": Decoder._sasl_init,
    "sasl-response": Decoder._sasl_response,
}
