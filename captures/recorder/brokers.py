"""The brokers the scenarios run against: RabbitMQ (started, its plugins enabled, its TLS
listener) and garagemq; the software versions each recording names."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

from recorder.amqp091 import pika_params
from recorder.harness import (
    BROKER_HOST,
    BROKER_PORT,
    GARAGEMQ_ADMIN_PORT,
    GARAGEMQ_HOME,
    GARAGEMQ_PORT,
    OPTIONAL_PLUGINS,
    REQUIRED_PLUGINS,
    log,
    port_open,
    run_cmd,
)
from recorder.tls import TLS_PORT, self_signed_cert


def amqp10_header_reply() -> bytes:
    """Send the AMQP 1.0 SASL protocol header; the amqp1_0 plugin answers with one."""
    with socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5) as sock:
        sock.sendall(b"AMQP\x03\x01\x00\x00")
        return sock.recv(8)


def wait_for_broker(deadline: float) -> None:
    """Wait until the node has booted and 5672 accepts connections."""
    while True:
        ok = run_cmd(["rabbitmqctl", "await_startup", "--timeout", "30"], timeout=60, check=False)
        if ok.returncode == 0 and port_open(BROKER_HOST, BROKER_PORT):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"RabbitMQ did not start: {ok.stdout}{ok.stderr}")
        time.sleep(2)


def start_rabbitmq() -> None:
    """rabbitmq-server -detached, in a session of its own (it outlives the recorder), then wait
    until it answers."""
    subprocess.run(
        ["rabbitmq-server", "-detached"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        check=True,
        timeout=60,
    )
    wait_for_broker(time.monotonic() + 120)


def ensure_broker() -> None:
    """Make sure RabbitMQ runs on 5672 with the AMQP 1.0 plugin; idempotent.

    Why: CI runs `make` as root on a fresh machine; the broker may be stopped
    and the plugin disabled. Plugins are enabled offline before a start (no
    restart needed) or online on a running node. Guest may log in over
    loopback and the 1.0 plugin maps SASL ANONYMOUS to its default_user
    (guest), so no configuration file is needed.
    """
    wanted = [*REQUIRED_PLUGINS, *OPTIONAL_PLUGINS]
    if not port_open(BROKER_HOST, BROKER_PORT):
        log("RabbitMQ is not listening on 5672; enabling plugins offline and starting it")
        if (
            run_cmd(["rabbitmq-plugins", "enable", "--offline", *wanted], check=False).returncode
            != 0
        ):
            run_cmd(["rabbitmq-plugins", "enable", "--offline", *REQUIRED_PLUGINS])
        start_rabbitmq()
    else:
        wait_for_broker(time.monotonic() + 60)
        listed = run_cmd(["rabbitmq-plugins", "list", "--enabled", "--minimal"]).stdout.split()
        missing = [p for p in wanted if p not in listed]
        if missing:
            log(f"enabling plugins {missing}")
            if run_cmd(["rabbitmq-plugins", "enable", *missing], check=False).returncode != 0:
                run_cmd(
                    ["rabbitmq-plugins", "enable", *[p for p in missing if p in REQUIRED_PLUGINS]]
                )
    deadline = time.monotonic() + 30
    while (reply := amqp10_header_reply()) != b"AMQP\x03\x01\x00\x00":
        if time.monotonic() > deadline:
            raise RuntimeError(f"AMQP 1.0 plugin not answering on 5672 (got {reply!r})")
        time.sleep(1)
    log("RabbitMQ is up with AMQP 1.0 on 5672")
    ensure_tls_listener()


#: garagemq's configuration: its package's /etc/garagemq/config.yaml (guest/guest, md5 checked),
#: moved to GARAGEMQ_PORT, with a database of its own so the Debian service is never touched
GARAGEMQ_CONFIG = """\
proto: amqp-rabbit
users:
  - username: guest
    password: 084e0343a0486ff05530df6c705c8bb4 # guest md5
tcp:
  ip: 127.0.0.1
  port: {port}
  nodelay: false
  readBufSize: 196608
  writeBufSize: 196608
admin:
  ip: 127.0.0.1
  port: {admin_port}
queue:
  shardSize: 8192
  maxMessagesInRam: 131072
db:
  defaultPath: {db}
  engine: badger
vhost:
  defaultPath: /
security:
  passwordCheck: md5
connection:
  channelsMax: 4096
  frameMaxSize: 65536
"""


def start_detached(
    what: str, cmd: list[str], log_path: Path, port: int, wait: float = 30, poll: float = 0.2
) -> None:
    """Start the broker `what` in its log's folder, in a session of its own (it outlives the
    recorder), its output appended to `log_path`; wait up to `wait` s until it listens on `port`."""
    with open(log_path, "ab") as out:
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=log_path.parent,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait
    while not port_open(BROKER_HOST, port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on {port}: see {log_path}")
        time.sleep(poll)


def ensure_garagemq() -> None:
    """Make sure garagemq runs on GARAGEMQ_PORT; idempotent.

    Why: diagnoses must hold on other brokers than RabbitMQ (garagemq answers differently: 530 on
    a wrong password, no tx.select-ok, requeues without the redelivered bit). It is started
    detached with a configuration of its own, as `make broker` starts RabbitMQ.
    """
    if port_open(BROKER_HOST, GARAGEMQ_PORT):
        return
    binary = shutil.which("garagemq")
    if binary is None:
        raise RuntimeError("no garagemq (Debian's garagemq package has it)")
    GARAGEMQ_HOME.mkdir(parents=True, exist_ok=True)
    config = GARAGEMQ_HOME / "config.yaml"
    config.write_text(
        GARAGEMQ_CONFIG.format(
            port=GARAGEMQ_PORT, admin_port=GARAGEMQ_ADMIN_PORT, db=GARAGEMQ_HOME / "db"
        )
    )
    start_detached(
        "garagemq", [binary, "--config", str(config)], GARAGEMQ_HOME / "garagemq.log", GARAGEMQ_PORT
    )
    log(f"garagemq is up on {GARAGEMQ_PORT}")


def clear_garagemq(name: str, queues: tuple[str, ...]) -> None:
    """Start garagemq if needed and delete `queues`, which a failed run of the scenario `name`
    left behind (outside the capture)."""
    ensure_garagemq()
    conn = pika.BlockingConnection(
        pika_params(port=GARAGEMQ_PORT, name=f"amqpscope housekeeping {name}")
    )
    try:
        ch = conn.channel()
        for queue in queues:
            try:
                ch.queue_delete(queue)
            except pika.exceptions.ChannelClosedByBroker:
                ch = conn.channel()  # garagemq closes the channel for a queue it does not have
    finally:
        conn.close()


def first_line(cmd: list[str]) -> str | None:
    """First non-empty output line of a --version style command, or None if missing."""
    if not shutil.which(cmd[0]):
        return None
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return lines[0] if lines else None


def software_versions(with_broker: bool) -> dict[str, Any]:
    """Versions of everything that shaped the bytes on the wire, for the JSON and README."""
    versions: dict[str, Any] = {
        "python": platform.python_version(),
        "pika": pika.__version__,
        "python-qpid-proton": importlib.metadata.version("python-qpid-proton"),
        "kernel": platform.release(),
        "tcpdump": first_line(["tcpdump", "--version"]),
        "dumpcap": first_line(["dumpcap", "--version"]),
    }
    tcpdump_out = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True).stdout
    if m := re.search(r"libpcap version (\S+)", tcpdump_out):
        versions["libpcap"] = m.group(1)
    if with_broker:
        versions["rabbitmqctl"] = first_line(["rabbitmqctl", "version"])
        conn = pika.BlockingConnection(pika_params(name="amqpscope recorder version probe"))
        props = conn._impl.server_properties  # the broker's connection.start properties
        conn.close()

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        versions["rabbitmq_server"] = text(props.get("version"))
        versions["erlang"] = text(props.get("platform"))
    return versions


TLS_DIR = Path("/etc/rabbitmq/amqpscope-tls")


RABBITMQ_CONF = Path("/etc/rabbitmq/rabbitmq.conf")


TLS_CONF_MARK = "# amqpscope: TLS listener for the TLS recordings (captures/record.py)"


def ensure_tls_listener() -> None:
    """RabbitMQ's TLS listener on 5671 with a certificate made here; idempotent.

    Why: the TLS scenarios need a broker that speaks TLS, on a fresh machine too. The
    certificate is made once (cryptography, else openssl) and the listener configured in
    rabbitmq.conf, which takes a broker restart; clients do not verify it (the recordings are
    about the bytes, and the key log is what matters).
    """
    if port_open(BROKER_HOST, TLS_PORT):
        return
    TLS_DIR.mkdir(parents=True, exist_ok=True)
    TLS_DIR.chmod(0o755)
    made = self_signed_cert(TLS_DIR)
    if made is None:
        raise RuntimeError("cannot make a certificate: neither cryptography nor openssl")
    for path in made:
        path.chmod(0o644)  # the broker runs as the rabbitmq user; a throwaway test key
    text = RABBITMQ_CONF.read_text() if RABBITMQ_CONF.exists() else ""
    if TLS_CONF_MARK not in text:
        cert, key = made
        text += (
            f"\n{TLS_CONF_MARK}\n"
            f"listeners.ssl.default = {TLS_PORT}\n"
            f"ssl_options.certfile = {cert}\n"
            f"ssl_options.keyfile = {key}\n"
            "ssl_options.verify = verify_none\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
            "ssl_options.versions.1 = tlsv1.3\n"
            "ssl_options.versions.2 = tlsv1.2\n"
        )
        RABBITMQ_CONF.write_text(text)
        RABBITMQ_CONF.chmod(0o644)
    log(f"restarting RabbitMQ for its TLS listener on {TLS_PORT}")
    run_cmd(["rabbitmqctl", "stop"], timeout=120, check=False)
    start_rabbitmq()
    deadline = time.monotonic() + 30
    while not port_open(BROKER_HOST, TLS_PORT):
        if time.monotonic() > deadline:
            raise RuntimeError(f"RabbitMQ did not open its TLS listener on {TLS_PORT}")
        time.sleep(1)
    log(f"RabbitMQ is up with TLS on {TLS_PORT}")


def broker_or_error() -> int:
    """`ensure_broker`, saying what stopped it in one line (as `make test` shows), no traceback."""
    if missing := [t for t in ("rabbitmq-server", "rabbitmq-plugins") if not shutil.which(t)]:
        log(f"cannot start RabbitMQ: no {' or '.join(missing)} (Debian's rabbitmq-server has them)")
        return 1
    try:
        ensure_broker()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        log(f"cannot start RabbitMQ: {err}")
        return 1
    try:
        ensure_garagemq()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        log(f"cannot start garagemq: {err}")
        return 1
    return 0


#: ActiveMQ Classic (Debian's activemq 5.17) for the 10-amq-* recordings: its AMQP 1.0 port, its
#: instance folder (configuration, data, log) and the one user its SASL PLAIN knows
ACTIVEMQ_PORT = int(os.environ.get("AMQPSCOPE_ACTIVEMQ_PORT", "5678"))
ACTIVEMQ_HOME = Path(os.environ.get("AMQPSCOPE_ACTIVEMQ_HOME", "/var/tmp/amqpscope-activemq"))
ACTIVEMQ_USER = ("amqpscope", "amqpscope")
ACTIVEMQ_JAR = Path("/usr/share/activemq/bin/activemq.jar")
#: the AMQP transport Debian's package leaves out (proton-j is not in Debian): the jars of the same
#: releases, from Maven Central or built from their sources (`build_activemq_amqp`)
ACTIVEMQ_AMQP_JARS = ("activemq-amqp-5.17.2.jar", "proton-j-0.33.10.jar")

#: the broker: no JMX, no persistence, SASL PLAIN for one user (simpleAuthenticationPlugin; no
#: anonymous access) who may use the queues named amqpscope.* and no other (authorizationPlugin),
#: only an AMQP connector on loopback
ACTIVEMQ_CONFIG = """\
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
  http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" persistent="false"
          brokerName="amqpscope" dataDirectory="{home}/data" schedulerSupport="false">
    <plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="false">
        <users>
          <authenticationUser username="{user}" password="{password}" groups="users"/>
        </users>
      </simpleAuthenticationPlugin>
      <authorizationPlugin>
        <map>
          <authorizationMap>
            <authorizationEntries>
              <authorizationEntry queue="amqpscope.>" read="users" write="users" admin="users"/>
              <authorizationEntry topic="ActiveMQ.Advisory.>" read="users" write="users"
                                  admin="users"/>
            </authorizationEntries>
          </authorizationMap>
        </map>
      </authorizationPlugin>
    </plugins>
    <transportConnectors>
      <transportConnector name="amqp" uri="amqp://127.0.0.1:{port}?maximumConnections=100"/>
    </transportConnectors>
  </broker>
</beans>
"""


def build_activemq_amqp(activemq_src: Path, proton_j_src: Path, lib: Path) -> None:
    """The two jars of ACTIVEMQ_AMQP_JARS compiled with javac from source trees checked out at
    tags activemq-5.17.2 and 0.33.10 (the Apache repositories), against Debian's jars."""
    java = Path("/usr/share/java")
    lib.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for jar, src, cp in (
            (ACTIVEMQ_AMQP_JARS[1], proton_j_src / "proton-j/src/main", ""),
            (ACTIVEMQ_AMQP_JARS[0], activemq_src / "activemq-amqp/src/main", "amqp"),
        ):
            out = Path(tmp) / jar
            classpath = [str(lib / ACTIVEMQ_AMQP_JARS[1])] if cp else []
            classpath += [str(java / f"{j}.jar") for j in ("activemq-broker", "activemq-client")]
            classpath += [str(java / f"{j}.jar") for j in ("slf4j-api", "hawtbuf")]
            classpath.append(str(java / "geronimo-jms_1.1_spec.jar"))
            sources = [str(p) for p in (src / "java").rglob("*.java")]
            javac = ["javac", "-nowarn", "--release", "11", "-encoding", "UTF-8", "-d", str(out)]
            run_cmd([*javac, "-cp", ":".join(classpath), *sources], timeout=600)
            if (src / "resources").is_dir():
                shutil.copytree(src / "resources", out, dirs_exist_ok=True)
            run_cmd(["jar", "cf", str(lib / jar), "-C", str(out), "."], timeout=120)


def ensure_activemq() -> None:
    """Make sure ActiveMQ Classic speaks AMQP 1.0 on ACTIVEMQ_PORT; idempotent.

    Why: an answer of diagnose must hold on brokers other than RabbitMQ, and ActiveMQ Classic
    (proton-j inside; the ancestor of Artemis) answers a 1.0 client its own way. Debian's package
    has the broker but not its AMQP transport: the jars of ACTIVEMQ_AMQP_JARS must be in
    ACTIVEMQ_HOME/lib (or AMQPSCOPE_ACTIVEMQ_SRC and AMQPSCOPE_PROTON_J_SRC name the source trees
    to build them from). Started detached by hand (no systemd here), 256 MB of heap at most.
    """
    conf = ACTIVEMQ_HOME / "conf"
    user, password = ACTIVEMQ_USER
    config = ACTIVEMQ_CONFIG.format(
        home=ACTIVEMQ_HOME, user=user, password=password, port=ACTIVEMQ_PORT
    )
    if port_open(BROKER_HOST, ACTIVEMQ_PORT):
        written = conf / "activemq.xml"
        if not written.exists() or written.read_text() != config:
            raise RuntimeError(
                f"something listens on {ACTIVEMQ_PORT} but not with this recorder's configuration"
                f" ({written}): stop it and record again"
            )
        return
    if not ACTIVEMQ_JAR.exists():
        raise RuntimeError(f"no {ACTIVEMQ_JAR}: apt-get install activemq (Debian's, 5.17)")
    lib = ACTIVEMQ_HOME / "lib"
    missing = [j for j in ACTIVEMQ_AMQP_JARS if not (lib / j).exists()]
    srcs = [os.environ.get(v) for v in ("AMQPSCOPE_ACTIVEMQ_SRC", "AMQPSCOPE_PROTON_J_SRC")]
    if missing and srcs[0] and srcs[1]:
        build_activemq_amqp(Path(srcs[0]), Path(srcs[1]), lib)
    elif missing:
        raise RuntimeError(
            f"Debian's activemq has no AMQP transport: put {' and '.join(missing)} in {lib}"
            " (Maven Central), or set AMQPSCOPE_ACTIVEMQ_SRC and AMQPSCOPE_PROTON_J_SRC to"
            " checkouts of apache/activemq at activemq-5.17.2 and apache/qpid-proton-j at 0.33.10"
        )
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "activemq.xml").write_text(config)
    home = f"-Dactivemq.base={ACTIVEMQ_HOME}"
    cmd = ["java", "-Xms64m", "-Xmx256m", "-Djava.awt.headless=true", home]
    cmd += ["-Dactivemq.home=/usr/share/activemq", f"-Dactivemq.conf={conf}"]
    cmd += [f"-Dactivemq.data={ACTIVEMQ_HOME / 'data'}", "-jar", str(ACTIVEMQ_JAR), "start"]
    cmd.append(f"xbean:file:{conf / 'activemq.xml'}")
    (ACTIVEMQ_HOME / "data").mkdir(exist_ok=True)
    start_detached(
        "ActiveMQ", cmd, ACTIVEMQ_HOME / "activemq.log", ACTIVEMQ_PORT, wait=90, poll=0.5
    )
    log(f"ActiveMQ is up with AMQP 1.0 on {ACTIVEMQ_PORT}")


def dpkg_version(package: str) -> str:
    """The Debian version of `package` installed here, as the recordings name it."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def activemq_version() -> str:
    """The Debian version of the activemq package the recordings ran."""
    return dpkg_version("activemq")
