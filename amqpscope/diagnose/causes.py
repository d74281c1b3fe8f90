"""What an error means, as data: one table per kind of cause, read by the rules.

Every close, detach, end or rejection with an error is explained from these tables (keyed by the
0-9-1 reply code's name as the specification spells it, by the 1.0 error condition's symbol, or
by a tracker finding's code), never by `if`s in the rules. A test checks every key against the
protocol tables generated from /work/shared/spec/, so no code here is invented.
"""

from __future__ import annotations

from typing import Final

from amqpscope.findings import ERROR, INFO, WARNING

#: diagnosis code -> (severity, what it answers). The one list of every diagnosis.
CODES: Final[dict[str, tuple[str, str]]] = {
    "consumer.stalled": (WARNING, "a consumer at its prefetch limit that stopped acking"),
    "consumer.cancelled": (WARNING, "the broker cancelled a consumer"),
    "consumer.flow-stopped": (WARNING, "channel.flow stopped a channel's content"),
    "delivery.unacked-at-end": (WARNING, "deliveries never acked when their channel ended"),
    "delivery.unsettled-at-end": (WARNING, "1.0 deliveries never settled when their link ended"),
    "delivery.no-ack-dropped": (
        WARNING,
        "messages delivered with no-ack to a client whose connection dropped: not requeued",
    ),
    "delivery.redelivered": (INFO, "deliveries marked redelivered: seen before by some consumer"),
    "delivery.rejected": (WARNING, "a 1.0 delivery rejected with an error"),
    "close.channel": (ERROR, "a channel closed with an error"),
    "close.connection": (ERROR, "a connection closed with an error"),
    "close.session": (ERROR, "a 1.0 session ended with an error"),
    "close.link": (ERROR, "a 1.0 link detached with an error"),
    "auth.refused": (ERROR, "the broker refused the login"),
    "publish.unconfirmed": (WARNING, "confirm-mode publishes never confirmed"),
    "publish.nacked": (WARNING, "publishes the broker nacked"),
    "publish.confirm-slow": (WARNING, "publisher confirms far slower than the channel's usual"),
    "publish.returned": (WARNING, "mandatory publishes the broker returned unroutable"),
    "publish.blocked": (WARNING, "the broker blocked the connection's publishers"),
    "credit.starved": (WARNING, "a 1.0 sender with messages waited with no credit"),
    "credit.drain-incomplete": (WARNING, "a 1.0 drain the sender never completed"),
    "session.window-closed": (WARNING, "a 1.0 session's incoming window stayed shut"),
    "liveness.heartbeat-missed": (WARNING, "a peer silent past the heartbeat / idle time-out"),
    "liveness.dropped": (WARNING, "TCP ended while the AMQP connection was open"),
    "spec.violation": (WARNING, "a frame that breaks a rule of the protocol"),
    "capture.bytes-lost": (WARNING, "bytes of a connection missing from the capture"),
    "auth.token-refused": (ERROR, "a CBS put-token answered with an error status"),
    "auth.token-expired": (
        ERROR,
        "a link dropped as unauthorized after its entity's token expired",
    ),
    "request.failed": (WARNING, "a management request answered with an error status"),
    "request.unanswered": (WARNING, "management or CBS requests never answered"),
    "credit.never-granted": (WARNING, "a 1.0 receiver that granted no credit after attaching"),
    "connection.not-opened": (ERROR, "a 1.0 connection whose TCP ended before either open"),
    "method.unanswered": (WARNING, "a synchronous 0-9-1 method the broker never answered"),
    "transaction.failed": (ERROR, "a 1.0 transaction declare or discharge that failed"),
}

#: how a redelivery was matched to its earlier delivery (`redelivery`), in words
MATCHED: Final[dict[str, str]] = {
    "message-id": "the same message-id and queue",
    "correlation-id": "the same correlation-id and queue",
    "body": "the same body from the same queue; equal bodies may be different messages",
}

#: a stall shorter than this is normal flow control, not a diagnosis (seconds)
STALL_SECONDS: Final = 1.0
#: a publisher confirm is an outlier when it took CONFIRM_SLOW_FACTOR times the channel's
#: median confirm latency and at least CONFIRM_SLOW_SECONDS (below that no publisher notices)
CONFIRM_SLOW_FACTOR: Final = 10.0
CONFIRM_SLOW_SECONDS: Final = 0.5
#: silence beyond this many negotiated heartbeat intervals is a missed heartbeat (0-9-1 says a
#: peer may close after two)
HEARTBEAT_INTERVALS: Final = 2

#: 0-9-1 reply-code name (spec section 1.2 constants) -> (likely cause, what to check)
REPLY_CAUSES: Final[dict[str, tuple[str, str]]] = {
    "CONTENT_TOO_LARGE": (
        "the message was larger than the broker accepts",
        "the broker's max message size and the publisher's body sizes",
    ),
    "NO_ROUTE": (
        "a mandatory publish matched no queue",
        "the exchange's bindings and the routing key",
    ),
    "NO_CONSUMERS": (
        "an immediate publish found no consumer ready",
        "whether a consumer was subscribed at the time",
    ),
    "CONNECTION_FORCED": (
        "an operator or the broker closed the connection (rabbitmqctl close_connection,"
        " a node shutting down, a policy)",
        "the broker's log at that time, and whether the node was restarting",
    ),
    "INVALID_PATH": (
        "the virtual host named in connection.open does not exist",
        "the vhost in the connection URL",
    ),
    "ACCESS_REFUSED": (
        "the user may not do this: a reserved name (amq.*), an exclusive queue of another"
        " connection, or missing permissions",
        "the user's permissions on the vhost and the names used",
    ),
    "NOT_FOUND": (
        "the method named a queue or exchange that does not exist",
        "the name in the method below, and who deletes or declares it",
    ),
    "RESOURCE_LOCKED": (
        "the queue is exclusive to another connection, or in use exclusively",
        "exclusive consumers and exclusive queues of other connections",
    ),
    "PRECONDITION_FAILED": (
        "the method's preconditions failed",
        "the method below and the state it depends on",
    ),
    "FRAME_ERROR": ("the peer sent a malformed frame", "the client library's version"),
    "SYNTAX_ERROR": ("a method's fields did not parse", "the client library's version"),
    "COMMAND_INVALID": (
        "a method not allowed in the current state",
        "the order of methods the client sent",
    ),
    "CHANNEL_ERROR": (
        "a frame on a channel that is not open",
        "channel numbers the client reuses after a close",
    ),
    "UNEXPECTED_FRAME": (
        "a frame the receiver did not expect (e.g. content without a method)",
        "whether two threads share one channel",
    ),
    "RESOURCE_ERROR": ("the broker ran short of a resource", "the broker's memory and disk"),
    "NOT_ALLOWED": (
        "the method is not allowed: e.g. a vhost the user may not open, or a channel-max exceeded",
        "the user's vhost access and the negotiated limits",
    ),
    "NOT_IMPLEMENTED": ("the broker does not implement the method", "the broker's features"),
    "INTERNAL_ERROR": ("the broker failed internally", "the broker's log"),
}

#: a synchronous 0-9-1 method the broker never answered -> what that may mean ("": any other);
#: a client waiting less than UNANSWERED_SECONDS before it ended is not worth a diagnosis
UNANSWERED_CAUSES: Final[dict[str, str]] = {
    "tx.select": "it may not support transactions",
    "tx.commit": "it may not support transactions",
    "tx.rollback": "it may not support transactions",
    "confirm.select": "it may not support publisher confirms",
    "": "it may be stuck on it (a broker bug, or a lock it waits for), or not implement it",
}
UNANSWERED_SECONDS: Final = 1.0

#: a passive declare (the client asking whether a queue or exchange exists, creating nothing)
#: answered with this reply code -> (what it means, what to check): the broker says no by closing
#: the channel, which is often what the client expected
PASSIVE_CAUSES: Final[dict[int, tuple[str, str]]] = {
    404: (
        "the client checked (a passive declare) for a {what} that does not exist: often"
        " expected, as a passive declare is how a client asks whether it exists, and the broker"
        " answers no by closing the channel",
        "whether the client expected it to exist; if so, who deletes it or should declare it",
    ),
}

#: RabbitMQ's reply-text when a delivery outlived the consumer timeout (rabbit_channel.erl:
#: "delivery acknowledgement on channel 1 timed out. Timeout value used: 1800000 ms. ...")
CONSUMER_TIMEOUT: Final = "delivery acknowledgement on channel"

#: (reply-code name, text the reply-text contains) -> (cause, what to check): the broker's
#: reply-text narrows a code down; the first match wins, then REPLY_CAUSES
TEXT_CAUSES: Final[tuple[tuple[str, str, str, str], ...]] = (
    (
        "PRECONDITION_FAILED",
        "unknown delivery tag",
        "the client acked, nacked or rejected a delivery tag the channel did not hold",
        "acks sent twice, acks on another channel than the delivery's, acks after a reopen,"
        " and acks of deliveries consumed with no-ack",
    ),
    (
        "PRECONDITION_FAILED",
        CONSUMER_TIMEOUT,
        "a delivery stayed unacked longer than the broker's consumer timeout (RabbitMQ's"
        " consumer_timeout, 30 minutes by default; its value is in the reply-text), and the"
        " broker closed the channel, requeueing what it held",
        "how long the consumer takes per message, and consumer_timeout in rabbitmq.conf or"
        " the queue's or consumer's x-consumer-timeout",
    ),
    (
        "PRECONDITION_FAILED",
        "larger than configured max size",
        "a published message was larger than the broker's max_message_size",
        "the size of the publish below and max_message_size in rabbitmq.conf",
    ),
    (
        "PRECONDITION_FAILED",
        "inequivalent arg",
        "a declare named an existing queue or exchange with different arguments",
        "the arguments of every declare of that name (x-max-length, durable, x-queue-type...)",
    ),
    (
        "ACCESS_REFUSED",
        "reserved prefix",
        "the name starts with amq., which only the broker may create",
        "the queue or exchange name",
    ),
    (
        "ACCESS_REFUSED",
        "login was refused",
        "the user name or password was wrong, or the user may not log in from here",
        "the credentials, and whether guest is connecting from a non-loopback address",
    ),
)

#: (cause, what to check) of a close that answered the client's credentials (start-ok or
#: secure-ok) with a code the reply-text does not narrow down
LOGIN_CAUSE: Final = (
    "the broker refused the credentials: a wrong user name or password, or a user that may not"
    " log in",
    "the credentials and the user's rights in the broker's configuration",
)

#: who ended the TCP connection with the AMQP connection open -> what ends it that way. Why: a
#: FIN from the client's side is its own process (an exit without connection.close: aiormq's
#: program ending, a killed PHP worker), not a broker that gave up; a RST may also be a network
#: device's, forged for either side
DROPPED_BY: Final[dict[str, str]] = {
    "client": (
        " The client's side ended it: a client that exited, was killed or crashed, or closed its"
        " socket without connection.close (a RST may also come from a network device); check the"
        " client's process."
    ),
    "server": (
        " The broker's side ended it: a broker dropping a connection it thought dead, shutting"
        " down or crashing (a RST may also come from a network device); check the broker's log."
    ),
}

#: client libraries (their client-properties `product`) that send heartbeats only when the
#: application asks: a silent client of theirs is most often an application that did not ask
HEARTBEAT_ON_DEMAND: Final[dict[str, str]] = {
    "py-amqp": (
        "py-amqp sends a heartbeat only from Connection.heartbeat_tick, which the application"
        " must call often (its documentation: about once a second; kombu: heartbeat_check):"
        " a long task or a blocking call between two calls is silence on the wire"
    ),
}

#: (cause, what to check) of a refused login whose start-ok chose a mechanism the broker's
#: connection.start did not offer ({chosen}, {offered}): the client's choice, not its password
MECHANISM_CAUSE: Final = (
    "the client logged in with the mechanism {chosen}, which the broker did not offer (its"
    " connection.start listed {offered}); the start-ok must choose one of those (AMQP 0-9-1,"
    " connection.start-ok): the refusal need not be about the credentials",
    "the client's login method setting (a library's default may be AMQPLAIN): choose one the"
    " broker offers",
)

#: 1.0 error condition (spec part 2 section 2.8.15-2.8.18) -> (cause, what to check)
CONDITION_CAUSES: Final[dict[str, tuple[str, str]]] = {
    "amqp:internal-error": ("the peer failed internally", "the peer's log"),
    "amqp:not-found": (
        "the address or node named in an attach does not exist",
        "the source or target address of the attach below",
    ),
    "amqp:unauthorized-access": (
        "the user may not use this address or connection",
        "the user's permissions and the SASL identity",
    ),
    "amqp:decode-error": ("a frame could not be decoded by the peer", "the client's version"),
    "amqp:resource-limit-exceeded": (
        "a limit of the peer was hit (links, sessions, memory, queue length)",
        "the broker's limits and alarms",
    ),
    "amqp:not-allowed": ("the peer does not allow this operation", "the attach's properties"),
    "amqp:invalid-field": (
        "a field held a value the peer does not accept (an address format, a delivery state)",
        "the field the description names",
    ),
    "amqp:not-implemented": ("the peer does not implement this", "the peer's supported features"),
    "amqp:resource-locked": ("the resource is locked by another link", "exclusive use elsewhere"),
    "amqp:precondition-failed": ("a precondition of the operation failed", "the description"),
    "amqp:resource-deleted": ("the node was deleted while in use", "who deleted the node"),
    "amqp:illegal-state": ("a frame arrived in a state that forbids it", "the frame order"),
    "amqp:frame-size-too-small": (
        "a frame would exceed the negotiated max-frame-size",
        "the max-frame-size each side offered in open",
    ),
    "amqp:connection:forced": (
        "an operator or the broker closed the connection",
        "the broker's log, and whether the node was restarting",
    ),
    "amqp:connection:framing-error": ("the peer could not read the framing", "the client"),
    "amqp:connection:redirect": ("the peer redirected to another host", "the info map"),
    "amqp:session:window-violation": (
        "a transfer beyond the session's incoming window",
        "the sender's session window accounting",
    ),
    "amqp:session:errant-link": ("a frame for a link that is not attached", "link handles"),
    "amqp:session:handle-in-use": ("an attach on a handle in use", "link handles"),
    "amqp:session:unattached-handle": ("a frame on an unattached handle", "link handles"),
    "amqp:link:detach-forced": (
        "the peer detached the link: the node was deleted or an operator acted",
        "the queue behind the address",
    ),
    "amqp:link:transfer-limit-exceeded": (
        "a transfer beyond the link's credit",
        "the sender's credit accounting",
    ),
    "amqp:link:message-size-exceeded": (
        "a message larger than the link's max-message-size",
        "message sizes against the attach's max-message-size",
    ),
    "amqp:link:redirect": ("the peer redirected the link", "the info map"),
    "amqp:link:stolen": (
        "another link with the same name attached and took this one over",
        "two clients using one link name (container-id + link name)",
    ),
}

#: tracker finding code -> (who breaks which rule, spec section). A violation is a diagnosis
#: of its own: it says whose bug it is.
VIOLATIONS: Final[dict[str, tuple[str, str]]] = {
    "amqp10.transfer-without-credit": (
        "a sender may send a delivery only while its link-credit is above zero",
        "AMQP 1.0 part 2, 2.6.7 Flow Control",
    ),
    "amqp10.window-exceeded": (
        "a session may not send transfers beyond its peer's incoming-window",
        "AMQP 1.0 part 2, 2.5.6 Session Flow Control",
    ),
    "amqp10.frame-too-large": (
        "no frame may exceed the max-frame-size its receiver announced in open",
        "AMQP 1.0 part 2, 2.7.1 Open",
    ),
    "amqp10.frame-after-close": (
        "nothing may be sent after close",
        "AMQP 1.0 part 2, 2.4.3 Closing A Connection",
    ),
    "amqp10.unexpected-frame": (
        "a frame its sender's connection state does not allow",
        "AMQP 1.0 part 2, 2.4.6 Connection States",
    ),
    "amqp10.unbegun-channel": (
        "session frames only on a begun channel",
        "AMQP 1.0 part 2, 2.5.1 Establishing A Session",
    ),
    "amqp10.unattached-handle": (
        "link frames only on an attached handle",
        "AMQP 1.0 part 2, 2.6.2 Link Handles",
    ),
    "amqp10.handle-in-use": (
        "an attach may not reuse a handle still attached",
        "AMQP 1.0 part 2, 2.6.2 Link Handles",
    ),
    "amqp10.channel-over-max": (
        "channel numbers may not exceed the negotiated channel-max",
        "AMQP 1.0 part 2, 2.7.1 Open",
    ),
    "amqp10.handle-over-max": (
        "handles may not exceed the session's handle-max",
        "AMQP 1.0 part 2, 2.7.2 Begin",
    ),
    "amqp10.wrong-role": (
        "only a link's sender transfers",
        "AMQP 1.0 part 2, 2.6.12 Transferring A Message",
    ),
    "amqp10.delivery-id-reused": (
        "a delivery-id is not reused while its delivery is unsettled",
        "AMQP 1.0 part 2, 2.7.5 Transfer",
    ),
    "amqp10.delivery-tag-reused": (
        "a delivery-tag is unique among a link's unsettled deliveries",
        "AMQP 1.0 part 2, 2.7.5 Transfer",
    ),
    "amqp10.unknown-delivery": (
        "a disposition names only deliveries that were transferred",
        "AMQP 1.0 part 2, 2.7.6 Disposition",
    ),
    "amqp10.settle-mode-violated": (
        "transfers follow the link's snd-settle-mode",
        "AMQP 1.0 part 2, 2.7.3 Attach",
    ),
    "amqp10.header-after-failed-sasl": (
        "protocol headers follow only a successful sasl-outcome: after a failed one nothing"
        " more is exchanged",
        "AMQP 1.0 part 5, 5.3.3.5 SASL Outcome",
    ),
    "amqp091.unknown-delivery-tag": (
        "a client acks only delivery tags its channel holds (the server MUST raise 406)",
        "AMQP 0-9-1, basic.ack / basic.reject rules",
    ),
    "amqp091.unexpected-method": (
        "a method its connection or channel state does not allow",
        "AMQP 0-9-1 section 4.2.3 / 4.2.4 (connection and channel state)",
    ),
    "amqp091.sent-after-close": (
        "a peer that sent connection.close sends nothing more but connection.close-ok, and"
        " discards what it receives but close and close-ok",
        "AMQP 0-9-1, connection.close",
    ),
}

#: violations that change nothing for the user, by the frame that broke the rule: reported as
#: info (RabbitMQ detaches and ends its links after sending close)
HARMLESS: Final[dict[str, frozenset[str]]] = {
    "amqp10.frame-after-close": frozenset(("detach", "end")),
    # ActiveMQ 5.17 sends its AMQP header after a failed SASL outcome: the login failed anyway
    "amqp10.header-after-failed-sasl": frozenset(("protocol-header",)),
}
#: violations harmless whatever the frame when the connection ended cleanly (no close carried an
#: error): RabbitMQ 3.10 sends a flow after its close when a credit refresh crossed the close.
#: Reported once per connection, as info
HARMLESS_ON_CLEAN_END: Final = frozenset({"amqp10.frame-after-close"})

#: diagnoses that cite where what a connection left unacked or unsettled was delivered again:
#: a connection retired early (`diagnose` of many) is diagnosed with these at the capture's end
DUPLICATES_LATER = frozenset({"delivery.unacked-at-end", "delivery.unsettled-at-end"})
