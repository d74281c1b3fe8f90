"""Outstanding tags of one channel: deliveries awaiting the client's ack, or publishes awaiting
the broker's confirm. Both are settled the same way (spec basic.ack, RabbitMQ's basic.nack):

- a tag settles itself; with `multiple`, every outstanding tag up to and including it;
- tag 0 with `multiple` settles everything outstanding;
- as RabbitMQ does (rabbit_channel:collect_acks), a tag that is not outstanding settles nothing,
  even with `multiple`: the broker answers it with channel.close 406 "unknown delivery tag".

Memory is what is outstanding on the wire: settling removes; tags are kept in the order they
were given (they only grow on a channel), so `multiple` walks from the oldest without a search.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final


class Outstanding:
    """tag -> what was noted when it was given (a timestamp, a consumer's tag, ...)."""

    __slots__ = ("first", "highest", "tags")

    def __init__(self) -> None:
        self.tags: OrderedDict[int, Any] = OrderedDict()
        self.highest = 0  # the highest tag given so far
        self.first = 0  # the first tag given (0: none yet)

    def __len__(self) -> int:
        return len(self.tags)

    def give(self, tag: int, note: Any) -> None:
        if not self.first:
            self.first = tag
        if tag > self.highest:
            self.highest = tag
        self.tags[tag] = note

    def settle(self, tag: int, multiple: bool) -> list[Any] | None:
        """The notes of the tags this settles, oldest first; None if `tag` is not outstanding."""
        tags = self.tags
        if multiple:
            if tag == 0:
                out = list(tags.values())
                tags.clear()
                return out
            if tag not in tags:
                return None
            out = []
            pop = tags.popitem
            while tags:
                oldest, note = pop(last=False)
                out.append(note)
                if oldest == tag:
                    break
            return out
        note = tags.pop(tag, _MISSING)
        if note is _MISSING:
            return None
        return [note]

    def through(self, tag: int) -> list[Any]:
        """The notes of every outstanding tag up to `tag`, oldest first, settled: a `multiple`
        whose own tag the capture lost (RabbitMQ would settle them; only its answer to an
        unknown tag is not known)."""
        tags = self.tags
        out = []
        while tags:
            oldest = next(iter(tags))
            if oldest > tag:
                break
            out.append(tags.pop(oldest))
        return out

    def drain(self) -> list[Any]:
        """Everything outstanding (the channel ended); empties the map."""
        out = list(self.tags.values())
        self.tags.clear()
        return out


_MISSING: Final = object()
