"""The uamqp side of captures/scenarios/peers10.py (10-uamqp-cpp-broker), run by Debian's
python3-uamqp under the system python3: `python3 _uamqp_client.py MODE PORT ADDRESS CERT`
(the leading underscore keeps record.py from loading it as a scenario module).

uamqp always speaks TLS, so it connects to a loopback relay that terminates TLS (CERT is the
relay's self-signed certificate, which uamqp is told to trust) and carries the bytes to the
broker. MODE send: a SendClient sends 3 messages to ADDRESS and closes; MODE receive: a
ReceiveClient (prefetch 10) takes 3 back, accepts them and closes. Prints what uamqp observed
as one JSON line.
"""

import json
import sys

import uamqp
from uamqp import authentication

mode, port, address, cert = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
counts = {"uamqp": uamqp.__version__}
auth = authentication.SASLAnonymous("localhost", port=port, verify=cert)
url = f"amqps://localhost:{port}/{address}"
if mode == "send":
    sender = uamqp.SendClient(uamqp.address.Target(url), auth=auth)
    for i in range(3):
        sender.queue_message(uamqp.Message(f"uamqp message {i}".encode()))
    states = sender.send_all_messages()
    counts["transfers_sent"] = len(states)
    counts["send_states"] = [str(state) for state in states]
    sender.close()
else:
    receiver = uamqp.ReceiveClient(uamqp.address.Source(url), auth=auth, timeout=3000, prefetch=10)
    messages = receiver.receive_message_batch(max_batch_size=3, timeout=3000)
    for message in messages:
        message.accept()
    counts["transfers_received"] = len(messages)
    counts["bodies"] = [b"".join(m.get_data()).decode() for m in messages]
    receiver.close()
print(json.dumps(counts))
