"""The uamqp side of captures/scenarios/uamqp_log.py (log-uamqp-broker), run by Debian's
python3-uamqp under the system python3: `python3 _uamqp_log_client.py PORT1 PORT2 ADDRESS CERT`
(the leading underscore keeps record.py from loading it as a scenario module).

uamqp's frame trace is switched on with `debug=True`: its C library's trace lines go to the
Python logger `uamqp.c_uamqp` as the repr of their bytes (`INFO b'-> [OPEN]* {...}'`), written
here to stderr in Python logging's usual layout, which is the log. A SendClient (through the TLS
relay on PORT1) sends 3 messages to ADDRESS and closes; a ReceiveClient (relay on PORT2,
prefetch 10, settling by hand) takes them back, accepts two and rejects the third with
amqp:not-allowed, and closes. Prints what uamqp observed as one JSON line.
"""

import json
import logging
import sys

import uamqp
from uamqp import authentication

logging.basicConfig(
    level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr
)
port1, port2, address, cert = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
counts = {"uamqp": uamqp.__version__}
auth = authentication.SASLAnonymous("localhost", port=port1, verify=cert)
sender = uamqp.SendClient(
    uamqp.address.Target(f"amqps://localhost:{port1}/{address}"), auth=auth, debug=True
)
for i in range(3):
    sender.queue_message(uamqp.Message(f"uamqp message {i}".encode()))
states = sender.send_all_messages()
counts["transfers_sent"] = len(states)
counts["send_states"] = [str(state) for state in states]
sender.close()

auth = authentication.SASLAnonymous("localhost", port=port2, verify=cert)
receiver = uamqp.ReceiveClient(
    uamqp.address.Source(f"amqps://localhost:{port2}/{address}"),
    auth=auth,
    debug=True,
    timeout=3000,
    prefetch=10,
    auto_complete=False,
)
messages = receiver.receive_message_batch(max_batch_size=3, timeout=3000)
settled = []
for index, message in enumerate(messages):
    if index < 2:
        settled.append(["accepted", message.accept()])
    else:
        done = message.reject(condition="amqp:not-allowed", description="rejected by the test")
        settled.append(["rejected", done])
counts["transfers_received"] = len(messages)
counts["bodies"] = [b"".join(m.get_data()).decode() for m in messages]
counts["settled"] = settled
receiver.close()
print(json.dumps(counts))
