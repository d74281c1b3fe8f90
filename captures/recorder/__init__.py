"""The recorder: real AMQP 0-9-1 and 1.0 traffic recorded into captures with ground truth.

`python3 captures/record.py` is its command line (`runner.main`). The package holds:

* `harness`: the registry (`scenario`, `SCENARIOS`), `Ctx`, `Counts`, the capture (`Capture`),
  the ports;
* `brokers`: RabbitMQ and garagemq started and configured (`--ensure-broker`), their versions;
* `amqp091` (pika) and `amqp10` (Qpid Proton): what the scenarios share, per protocol;
* `tls`: certificates, key logs, the TLS relay;
* the scenarios by family (`FAMILIES`), registered in that order: the order of `--list` and of
  a full recording;
* `runner`: a scenario in a child process under capture, its JSON, the tshark check, `main`.

Importing the package registers every scenario: its own families, then the modules of
captures/scenarios/ in name order (`load_scenario_families`), which import this package
(`import recorder as record`) and register with `record.scenario`. The names below are what those
modules use; `captures/record.py` answers for any of the package's names too, so a scenario
module that still says `import record` works unchanged.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from recorder.amqp091 import (
    basic_round_trip as basic_round_trip,
)
from recorder.amqp091 import (
    broker_housekeeping as broker_housekeeping,
)
from recorder.amqp091 import (
    channel_with_queue as channel_with_queue,
)
from recorder.amqp091 import (
    close_091 as close_091,
)
from recorder.amqp091 import (
    connect_091 as connect_091,
)
from recorder.amqp091 import (
    consume_and_ack as consume_and_ack,
)
from recorder.amqp091 import (
    delete_and_close as delete_and_close,
)
from recorder.amqp091 import (
    missing_then_delete as missing_then_delete,
)
from recorder.amqp091 import (
    pika_params as pika_params,
)
from recorder.amqp091 import (
    publish_plain as publish_plain,
)
from recorder.amqp091 import (
    pump as pump,
)
from recorder.amqp10 import (
    PeerToPeer as PeerToPeer,
)
from recorder.amqp10 import (
    ProtonClient as ProtonClient,
)
from recorder.amqp10 import (
    ProtonPeers as ProtonPeers,
)
from recorder.amqp10 import (
    cond_dict as cond_dict,
)
from recorder.amqp10 import (
    queue_address as queue_address,
)
from recorder.amqp10 import (
    text_message as text_message,
)
from recorder.brokers import (
    GARAGEMQ_CONFIG as GARAGEMQ_CONFIG,
)
from recorder.brokers import (
    RABBITMQ_CONF as RABBITMQ_CONF,
)
from recorder.brokers import (
    TLS_CONF_MARK as TLS_CONF_MARK,
)
from recorder.brokers import (
    TLS_DIR as TLS_DIR,
)
from recorder.brokers import (
    amqp10_header_reply as amqp10_header_reply,
)
from recorder.brokers import (
    broker_or_error as broker_or_error,
)
from recorder.brokers import (
    clear_garagemq as clear_garagemq,
)
from recorder.brokers import (
    ensure_activemq as ensure_activemq,
)
from recorder.brokers import (
    ensure_broker as ensure_broker,
)
from recorder.brokers import (
    ensure_garagemq as ensure_garagemq,
)
from recorder.brokers import (
    ensure_tls_listener as ensure_tls_listener,
)
from recorder.brokers import (
    first_line as first_line,
)
from recorder.brokers import (
    software_versions as software_versions,
)
from recorder.brokers import (
    wait_for_broker as wait_for_broker,
)
from recorder.harness import (
    BROKER_HOST as BROKER_HOST,
)
from recorder.harness import (
    BROKER_PORT as BROKER_PORT,
)
from recorder.harness import (
    GARAGEMQ_ADMIN_PORT as GARAGEMQ_ADMIN_PORT,
)
from recorder.harness import (
    GARAGEMQ_HOME as GARAGEMQ_HOME,
)
from recorder.harness import (
    GARAGEMQ_PORT as GARAGEMQ_PORT,
)
from recorder.harness import (
    GUEST as GUEST,
)
from recorder.harness import (
    HERE as HERE,
)
from recorder.harness import (
    LINKTYPES as LINKTYPES,
)
from recorder.harness import (
    OPTIONAL_PLUGINS as OPTIONAL_PLUGINS,
)
from recorder.harness import (
    P2P_PORT as P2P_PORT,
)
from recorder.harness import (
    PEER_TO_PEER as PEER_TO_PEER,
)
from recorder.harness import (
    REQUIRED_PLUGINS as REQUIRED_PLUGINS,
)
from recorder.harness import (
    RING_KIB as RING_KIB,
)
from recorder.harness import (
    SASL_OUTCOMES as SASL_OUTCOMES,
)
from recorder.harness import (
    SCENARIOS as SCENARIOS,
)
from recorder.harness import (
    STREAM_PORT as STREAM_PORT,
)
from recorder.harness import (
    WS_FRAGMENT as WS_FRAGMENT,
)
from recorder.harness import (
    WS_PATH as WS_PATH,
)
from recorder.harness import (
    WS_PORT as WS_PORT,
)
from recorder.harness import (
    Capture as Capture,
)
from recorder.harness import (
    CaptureSpec as CaptureSpec,
)
from recorder.harness import (
    Counts as Counts,
)
from recorder.harness import (
    Ctx as Ctx,
)
from recorder.harness import (
    RunFn as RunFn,
)
from recorder.harness import (
    Scenario as Scenario,
)
from recorder.harness import (
    busy_connections as busy_connections,
)
from recorder.harness import (
    log as log,
)
from recorder.harness import (
    npm_modules as npm_modules,
)
from recorder.harness import (
    own_broker as own_broker,
)
from recorder.harness import (
    p2p_port_free as p2p_port_free,
)
from recorder.harness import (
    pcap_file_info as pcap_file_info,
)
from recorder.harness import (
    port_open as port_open,
)
from recorder.harness import (
    ports_of as ports_of,
)
from recorder.harness import (
    rhea_client as rhea_client,
)
from recorder.harness import (
    run_cmd as run_cmd,
)
from recorder.harness import (
    scenario as scenario,
)
from recorder.harness import (
    wait_quiet as wait_quiet,
)
from recorder.runner import (
    DECODE_AS_AMQP as DECODE_AS_AMQP,
)
from recorder.runner import (
    main as main,
)
from recorder.tls import (
    TLS_PORT as TLS_PORT,
)
from recorder.tls import (
    TlsRelay as TlsRelay,
)
from recorder.tls import (
    drain_and_close as drain_and_close,
)
from recorder.tls import (
    embed_secrets as embed_secrets,
)
from recorder.tls import (
    keylog_path as keylog_path,
)
from recorder.tls import (
    relay as relay,
)
from recorder.tls import (
    self_signed_cert as self_signed_cert,
)
from recorder.tls import (
    tls_client_context as tls_client_context,
)
from recorder.tls import (
    tls_facts as tls_facts,
)

#: the scenario families of this package, in registration order (helpers never import them)
FAMILIES = (
    "s091_messaging",
    "s091_channels",
    "s091_framing",
    "s10_messaging",
    "s10_sasl",
    "s10_links",
    "s10_peers",
    "s_non_amqp",
    "s10_websocket",
    "s_tls",
    "s091_misbehaving",
)
for _family in FAMILIES:
    importlib.import_module(f"recorder.{_family}")


def load_scenario_families() -> None:
    """Register the scenario modules of captures/scenarios/ (one family each, e.g. diagnoses,
    trace logs), in name order, after this package's own: they are the package `scenarios`
    beside this one (captures/ is on sys.path, as running captures/record.py puts it)."""
    for path in sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.py")):
        if not path.name.startswith("_"):
            importlib.import_module(f"scenarios.{path.stem}")


load_scenario_families()
