"""No credential reaches any output unless --show-secrets; --redact-bodies drops every payload.

The passwords are those the recorder (captures/recorder/) logged in with (read from its source,
not typed in here): the refused 0-9-1 login and the failed SASL PLAIN login use a wrong password,
the successful SASL PLAIN login guest's. Every output is searched for them, as text and as the hex
a binary field would show: the timeline, `read --json`, `export` (document and NDJSON),
`summary` (tables and JSON), the stderr of each, and the live pipeline's frames. AMQPLAIN and a
CBS put-token, which no recording has, come from pika's and Qpid Proton's encoders, wrapped in a
pcap, and go through the same commands.
"""

from __future__ import annotations

import ast
import json
import struct
import subprocess
import sys
from pathlib import Path

import pika.data
import pika.frame
import pika.spec
import pytest
from click.testing import CliRunner
from proton import Message

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.live_decode import LiveDecoder
from amqpscope.render.lines import frame_ndjson
from tests import peers
from tests.test_dissect_robust import packets_for

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"


def recorded_passwords() -> dict[str, str]:
    """Scenario function -> the password it logs in with, from the recorder's source
    (captures/recorder/): the `password=` keyword of its calls, else the default (GUEST)."""
    body = [
        node
        for path in sorted((CAPTURES / "recorder").glob("*.py"))
        for node in ast.parse(path.read_text()).body
    ]
    guest = next(
        node.value.elts[1].value
        for node in body
        if isinstance(node, ast.Assign)
        and getattr(node.targets[0], "id", "") == "GUEST"
        and isinstance(node.value, ast.Tuple)
    )
    out = {}
    for fn in body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        given = [
            kw.value.value
            for call in ast.walk(fn)
            if isinstance(call, ast.Call)
            for kw in call.keywords
            if kw.arg == "password" and isinstance(kw.value, ast.Constant)
        ]
        out[fn.name] = given[0] if given else guest
    return out


PASSWORDS = recorded_passwords()
#: capture -> (its scenario's password, its user)
LOGINS = {
    "091-refused-login.pcap": (PASSWORDS["s_refused_login"], "guest"),
    "10-sasl-failed.pcap": (PASSWORDS["s10_sasl_failed"], "guest"),
    "10-sasl-plain.pcap": (PASSWORDS["s10_sasl_plain"], "guest"),
}
#: every output, as (name, arguments before the file); `shows` says whether --show-secrets applies
OUTPUTS = [
    ("timeline", ["read", "--width", "200"], True),
    ("read --json", ["read", "--json"], True),
    ("export", ["export"], True),
    ("export --ndjson", ["export", "--ndjson"], True),
    ("summary", ["summary", "--width", "200"], False),
    ("summary --json", ["summary", "--json"], False),
]


def run(args: list[str]) -> tuple[str, str]:
    """The command, in-process (the same code as `amqpscope ARGS`): (stdout, stderr)."""
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout, result.stderr


def test_the_command_line_itself_hides_them() -> None:
    """Once as a real process, as a user runs it."""
    password, _user = LOGINS["091-refused-login.pcap"]
    proc = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", str(CAPTURES / "091-refused-login.pcap")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "start-ok" in proc.stdout
    assert password not in proc.stdout + proc.stderr


def forms(password: str, user: str) -> list[str]:
    """How a password could show: itself where it is not also the user name, and always the
    SASL PLAIN response and the password as hex (a binary field)."""
    out = [f"\0{user}\0{password}".encode().hex(), password.encode().hex()]
    if password != user:
        out.append(password)
    out += [f"password={password}", f'"password":"{password}"', f'"PASSWORD":"{password}"']
    return out


def test_the_recorded_passwords_were_found() -> None:
    assert PASSWORDS["s_refused_login"] == PASSWORDS["s10_sasl_failed"] == "wrong-password"
    assert PASSWORDS["s10_sasl_plain"] == "guest"


@pytest.mark.parametrize("capture", sorted(LOGINS))
@pytest.mark.parametrize(("output", "args", "shows"), OUTPUTS, ids=[o[0] for o in OUTPUTS])
def test_no_password_in_any_output(capture: str, output: str, args: list[str], shows: bool) -> None:
    password, user = LOGINS[capture]
    stdout, stderr = run([*args, str(CAPTURES / capture)])
    for form in forms(password, user):
        assert form not in stdout and form not in stderr, (output, form)
    if not shows:
        # summary has no --show-secrets: it never shows credentials at all
        assert run([*args, str(CAPTURES / capture)])[0] == stdout
        return
    shown, _ = run([*args, "--show-secrets", str(CAPTURES / capture)])
    wanted = f"password={password}" if output == "timeline" else f'"password":"{password}"'
    assert wanted in shown, output


@pytest.mark.parametrize("capture", sorted(LOGINS))
def test_no_password_from_the_live_pipeline(capture: str) -> None:
    """`live` decodes with `LiveDecoder`; its frames (what --json and the timeline print) and
    its summary hide the password too, unless it is asked to show secrets."""
    password, user = LOGINS[capture]
    for show in (False, True):
        pipeline = LiveDecoder(show_secrets=show)
        lines = []
        with open_capture(CAPTURES / capture) as packets:
            for packet in packets:
                lines += [frame_ndjson(f).decode() for f in pipeline.feed(packet)]
        lines += [frame_ndjson(f).decode() for f in pipeline.finish()]
        text = "\n".join(lines) + json.dumps(pipeline.summary())
        for form in forms(password, user):
            if show and form == f'"password":"{password}"':
                assert form in text
            elif not show:
                assert form not in text, form


# -- credentials no recording has: AMQPLAIN, secure-ok, a CBS token -----------------------------
def write_pcap(path: Path, chunks: list[tuple[bool, bytes]]) -> Path:
    """A raw-IP pcap of one connection carrying `chunks` (True: client to server)."""
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 101))
        for p in packets_for(chunks, syn=True):
            sec, usec = int(p.ts), round(p.ts % 1 * 1e6)
            f.write(struct.pack("<IIII", sec, usec, len(p.data), len(p.data)) + p.data)
    return path


SECRET = "s3cret-Tok3n"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("secrets")
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, {"LOGIN": "guest", "PASSWORD": SECRET})
    amqplain = b"".join(pieces)[4:]  # AMQPLAIN's response: a table without its length
    methods = [
        pika.spec.Connection.StartOk({}, "AMQPLAIN", amqplain, "en_US"),
        pika.spec.Connection.SecureOk(SECRET.encode()),
    ]
    chunks = [(True, peers.protocol_header_091())]
    chunks += [(True, pika.frame.Method(0, m).marshal()) for m in methods]
    cbs = Message(
        body=f"SharedAccessSignature sr=x&sig={SECRET}",
        id="req-1",
        reply_to="cbs-client-reply",
        properties={"operation": "put-token", "type": "servicebus.windows.net:sastoken"},
    )
    from tests.test_amqp10_decoder import deliver

    writes = deliver([cbs], target="$cbs")
    return {
        "amqplain": write_pcap(where / "amqplain.pcap", chunks),
        "cbs": write_pcap(where / "cbs.pcap", [(d == "c2s", b) for d, b in writes]),
    }


@pytest.mark.parametrize("kind", ["amqplain", "cbs"])
@pytest.mark.parametrize(("output", "args", "shows"), OUTPUTS, ids=[o[0] for o in OUTPUTS])
def test_no_token_in_any_output(
    kind: str, output: str, args: list[str], shows: bool, synthetic: dict[str, Path]
) -> None:
    stdout, stderr = run([*args, str(synthetic[kind])])
    for form in (SECRET, SECRET.encode().hex()):
        assert form not in stdout and form not in stderr, (output, form)
    if shows and output != "timeline":
        shown, _ = run([*args, "--show-secrets", str(synthetic[kind])])
        assert SECRET in shown or SECRET.encode().hex() in shown, output


# -- --redact-bodies -------------------------------------------------------------------------
BODIES = {  # a capture and a body text its ground truth says was sent
    "091-publish-consume.pcap": "091-publish-consume message 0",
    "10-send-receive.pcap": None,
    "091-large-body.pcap": None,
}


@pytest.mark.parametrize("capture", sorted(BODIES))
@pytest.mark.parametrize(
    "args",
    [["read", "--body", "--width", "200"], ["read", "--json"], ["export"], ["export", "--ndjson"]],
)
def test_redact_bodies_drops_every_payload(capture: str, args: list[str]) -> None:
    plain, _ = run([*args, str(CAPTURES / capture)])
    redacted, _ = run([*args, "--redact-bodies", str(CAPTURES / capture)])
    for key in ('"text":', '"hex":', "body=0x"):
        if key in plain and key != '"hex":':
            assert key not in redacted, key
    if args[-1] in ("--json", "export", "--ndjson"):
        if args == ["export"]:
            records = json.loads(redacted)["frames"]
        else:
            records = [json.loads(line) for line in redacted.splitlines()]
        messages = [r["message"] for r in records if r.get("message")]
        assert messages
        for message in messages:
            body = message.get("body") or message
            assert body.get("redacted") is True, message
            assert not {"text", "hex", "value"} & set(body), message
    if BODIES[capture]:
        assert BODIES[capture] in plain and BODIES[capture] not in redacted
        assert BODIES[capture].encode().hex() not in redacted
