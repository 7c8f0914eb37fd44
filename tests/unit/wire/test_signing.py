"""Request signing as Apache RocketMQ's ACL does it: the content rule (values sorted by key in
Java's order, ``Signature`` and, for old clients, ``_UNIQUE_KEY_QUERY`` left out, the body
appended), HMAC-SHA1 + Base64, sign-then-verify, and tampering. When ``make compat-deps`` has
fetched rocketmq-acl 4.9.8, signatures are also compared with its ``AclClientRPCHook``."""

from __future__ import annotations

import base64
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.wire.codes import VERSION, RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.signing import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    sign,
    signature,
    signature_matches,
    signed_content,
)
from tests.unit.wire.strategies import text

RESERVED = {ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, UNIQUE_KEY_QUERY}


def request(fields: dict[str, str], body: bytes = b"", version: int = VERSION) -> RemotingCommand:
    command = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields), body)
    command.version = version
    return command


# ------------------------------------------------------------------ the algorithm
def test_known_vector() -> None:
    """RocketMQ's ``AclSignerTest``."""
    assert signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_values_in_key_order_without_keys_or_separators() -> None:
    fields = {"topic": "T", "a": "1", "Z": "z", "queueId": "3"}
    # Upper case sorts before lower case: Z, a, queueId, topic.
    assert signed_content(fields, b"", VERSION) == b"z13T"


def test_body_appended_raw() -> None:
    body = bytes(range(256))
    assert signed_content({"k": "v"}, body, VERSION) == b"v" + body


def test_signature_field_left_out() -> None:
    fields = {"a": "1", SIGNATURE: "whatever", "b": "2"}
    assert signed_content(fields, b"x", VERSION) == b"12x"


def test_access_key_and_token_are_signed_like_any_field() -> None:
    fields = {ACCESS_KEY: "ak", SECURITY_TOKEN: "tok", "b": "2"}
    assert signed_content(fields, b"", VERSION) == b"aktok2"


def test_java_string_order_for_characters_above_the_bmp() -> None:
    """Java's TreeMap compares UTF-16 code units: U+1F600 (surrogates D83D DE00) sorts
    before U+FFFD, although its code point is higher."""
    emoji, replacement = "\U0001f600", "\ufffd"
    fields = {replacement: "second", emoji: "first"}
    assert sorted(fields) == [replacement, emoji]  # Python's order is not Java's
    assert signed_content(fields, b"", VERSION) == b"firstsecond"


def test_utf8_values() -> None:
    assert signed_content({"k": "héllo €"}, b"", VERSION) == "héllo €".encode()


def test_lone_surrogate_is_written_as_question_mark() -> None:
    """JSON can carry a lone surrogate; Java's ``String.getBytes(UTF_8)`` writes ``?``."""
    assert signed_content({"k": "a\ud800b"}, b"", VERSION) == b"a?b"


@pytest.mark.parametrize(
    ("version", "included"),
    [(0, False), (121, False), (317, False), (399, False), (400, True), (401, True), (409, True)],
)
def test_unique_key_query_signed_from_4_9_4_on(version: int, included: bool) -> None:
    fields = {"topic": "T", UNIQUE_KEY_QUERY: "U", "key": "K"}
    expected = b"UKT" if included else b"KT"  # "_" sorts before lower case
    assert signed_content(fields, b"", version) == expected


def test_old_client_query_verifies() -> None:
    """A 4.9.3 client signs without ``_UNIQUE_KEY_QUERY`` and sends it afterwards."""
    old = request({"topic": "T", "key": "K"}, version=399)
    sign(old, "access-key", "secret-key")
    old.ext_fields[UNIQUE_KEY_QUERY] = "U"
    assert signature_matches(old, "secret-key")
    new = request({"topic": "T", "key": "K"}, version=409)
    sign(new, "access-key", "secret-key")
    new.ext_fields[UNIQUE_KEY_QUERY] = "U"
    assert not signature_matches(new, "secret-key")


# ------------------------------------------------------------------ sign and verify
def test_sign_adds_access_key_and_signature() -> None:
    command = request({"topic": "TopicTest"}, b"hello")
    sign(command, "RocketMQ", "12345678")
    assert command.ext_fields == {
        "topic": "TopicTest",
        ACCESS_KEY: "RocketMQ",
        # AclClientRPCHook of rocketmq-acl 4.9.8 gives this for the same request.
        SIGNATURE: "IlhJmDi56c1+sdRGdQLyYHpYz4g=",
    }
    assert signature_matches(command, "12345678")


def test_sign_with_security_token() -> None:
    command = request({"topic": "TopicTest"})
    sign(command, "RocketMQ", "12345678", security_token="token")
    assert command.ext_fields[SECURITY_TOKEN] == "token"
    assert command.ext_fields[SIGNATURE] == signature(b"RocketMQtokenTopicTest", "12345678")
    assert signature_matches(command, "12345678")


def test_signing_again_replaces_the_signature() -> None:
    command = request({"topic": "T"})
    sign(command, "access-key", "old-secret")
    sign(command, "access-key", "new-secret")
    assert signature_matches(command, "new-secret")
    assert not signature_matches(command, "old-secret")


@pytest.mark.parametrize(
    "received", [None, "", "AAAA", "é-not-base64", "IlhJmDi56c1+sdRGdQLyYHpYz4g"]
)
def test_missing_or_wrong_signature_fails(received: str | None) -> None:
    command = request({"topic": "TopicTest", ACCESS_KEY: "RocketMQ"}, b"hello")
    if received is not None:
        command.ext_fields[SIGNATURE] = received
    assert not signature_matches(command, "12345678")


def test_wrong_secret_fails() -> None:
    command = request({"topic": "T"})
    sign(command, "access-key", "secret-key")
    assert not signature_matches(command, "secret-kez")


def signed_sample() -> RemotingCommand:
    command = request(
        {"a": "producer", "b": "orders", "e": "3", "i": "KEYS\x01k1\x02"}, b"\x00body\xff"
    )
    sign(command, "orders-team", "orders-secret", security_token="tok")
    return command


@pytest.mark.parametrize("name", ["a", "b", "e", "i", ACCESS_KEY, SECURITY_TOKEN])
def test_changing_any_field_fails(name: str) -> None:
    command = signed_sample()
    command.ext_fields[name] += "x"
    assert not signature_matches(command, "orders-secret")


def test_changing_the_body_fails() -> None:
    command = signed_sample()
    command.body = command.body[:-1] + b"\xfe"
    assert not signature_matches(command, "orders-secret")


def test_adding_or_removing_a_field_fails() -> None:
    added = signed_sample()
    added.ext_fields["j"] = "1"
    assert not signature_matches(added, "orders-secret")
    removed = signed_sample()
    del removed.ext_fields["e"]
    assert not signature_matches(removed, "orders-secret")


def test_keys_are_not_signed() -> None:
    """RocketMQ signs values only: renaming a field without changing the order of the values,
    or adding an empty one, keeps the signature. Callers must not rely on the signature for
    which field a value sits in beyond that order."""
    command = signed_sample()
    command.ext_fields["f"] = command.ext_fields.pop("e")
    command.ext_fields["empty"] = ""
    assert signature_matches(command, "orders-secret")


# ------------------------------------------------------------------ properties
fields_st = st.dictionaries(text.filter(lambda key: key not in RESERVED), text, max_size=8)
secrets = st.text(min_size=1, max_size=30)


@given(
    fields=fields_st,
    body=st.binary(max_size=200),
    access_key=text,
    secret_key=secrets,
    token=st.none() | text,
    version=st.integers(0, 1000),
)
def test_sign_then_verify(
    fields: dict[str, str],
    body: bytes,
    access_key: str,
    secret_key: str,
    token: str | None,
    version: int,
) -> None:
    command = request(fields, body, version)
    sign(command, access_key, secret_key, token)
    assert signature_matches(command, secret_key)


@given(
    fields=fields_st,
    body=st.binary(max_size=200),
    secret_key=secrets,
    version=st.integers(0, 1000),
    data=st.data(),
)
def test_any_single_change_fails(
    fields: dict[str, str], body: bytes, secret_key: str, version: int, data: st.DataObject
) -> None:
    """Every change that alters the signed content: a value, the body, a field with a
    non-empty value added or removed, the secret."""
    command = request(fields, body, version)
    sign(command, "access-key", secret_key)
    signed = dict(command.ext_fields)
    change = data.draw(st.sampled_from(["value", "body", "add", "remove", "secret"]))
    key = secret_key
    if change == "value":
        name = data.draw(st.sampled_from(sorted(set(signed) - {SIGNATURE})))
        command.ext_fields[name] = data.draw(text.filter(lambda v: v != signed[name]))
    elif change == "body":
        command.body = data.draw(st.binary(max_size=200).filter(lambda b: b != body))
    elif change == "add":
        name = data.draw(text.filter(lambda k: k not in signed and k not in RESERVED))
        command.ext_fields[name] = data.draw(st.text(min_size=1, max_size=10))
    elif change == "remove":
        candidates = sorted(name for name, value in fields.items() if value)
        if not candidates:
            return
        del command.ext_fields[data.draw(st.sampled_from(candidates))]
    else:
        # HMAC pads short keys with zero bytes: "k" and "k\0" are the same key.
        key = data.draw(secrets.filter(lambda s: s.rstrip("\0") != secret_key.rstrip("\0")))
    assert not signature_matches(command, key)


# ------------------------------------------------------------------ Apache RocketMQ itself
JVM_FLAGS = ("-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
ACL_LIB = Path(__file__).resolve().parents[3] / "tests" / "compat" / "mqadmin" / "target" / "lib"
JAVA_SIGNER = """
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/** One request a line: access key, secret key, "" or "+token", body, then key and value
 *  pairs, each Base64; prints the Signature AclClientRPCHook adds. */
public class SignRequests {
    static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] parts = line.split(" ", -1);
            SessionCredentials credentials = new SessionCredentials(text(parts[0]), text(parts[1]));
            if (!parts[2].isEmpty()) {
                credentials.setSecurityToken(text(parts[2].substring(1)));
            }
            RemotingCommand request = RemotingCommand.createRequestCommand(10, null);
            request.setBody(Base64.getDecoder().decode(parts[3]));
            for (int i = 4; i + 1 < parts.length; i += 2) {
                request.addExtField(text(parts[i]), text(parts[i + 1]));
            }
            new AclClientRPCHook(credentials).doBeforeRequest("127.0.0.1:10911", request);
            System.out.println("signature " + request.getExtFields().get("Signature"));
        }
    }
}
"""
# ASCII, BMP characters above the surrogates, and characters above the BMP: the mix where
# Java's UTF-16 order and Python's code-point order disagree.
ALPHABET = "aZ_%09-|\u00e9\u4e2d\ue000\ufffd\uffee\U00010000\U0001f600\U0010fffd"


def b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def random_requests(count: int) -> list[tuple[str, str, str | None, RemotingCommand]]:
    rng = random.Random(20240607)

    def word(low: int, high: int) -> str:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(low, high)))

    cases = []
    for i in range(count):
        fields = {word(1, 6): word(0, 8) for _ in range(rng.randint(0, 10))}
        for reserved in RESERVED - {UNIQUE_KEY_QUERY}:
            fields.pop(reserved, None)
        if i % 5 == 0:
            fields[UNIQUE_KEY_QUERY] = word(1, 10)
        body = rng.randbytes(rng.randint(0, 64))
        token = word(1, 8) if i % 3 == 0 else None
        cases.append((word(7, 12), word(7, 12), token, request(fields, body)))
    return cases


def test_same_signatures_as_rocketmq_acl_client_hook(tmp_path: Path) -> None:
    java = shutil.which("java")
    if java is None or not (ACL_LIB / "rocketmq-acl-4.9.8.jar").is_file():
        pytest.skip(f"needs java and rocketmq-acl 4.9.8 in {ACL_LIB} (make compat-deps)")
    cases = random_requests(60)
    lines = []
    for access_key, secret_key, token, command in cases:
        parts = [b64(access_key), b64(secret_key), "" if token is None else "+" + b64(token)]
        parts.append(b64(command.body))
        for key, value in command.ext_fields.items():
            parts += [b64(key), b64(value)]
        lines.append(" ".join(parts))
    source = tmp_path / "SignRequests.java"
    source.write_text(JAVA_SIGNER)
    result = subprocess.run(
        [java, *JVM_FLAGS, "-cp", f"{ACL_LIB}/*", str(source)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    java_signatures = [
        line.removeprefix("signature ")
        for line in result.stdout.splitlines()
        if line.startswith("signature ")
    ]
    assert len(java_signatures) == len(cases)
    for (access_key, secret_key, token, command), expected in zip(
        cases, java_signatures, strict=True
    ):
        sign(command, access_key, secret_key, token)
        assert command.ext_fields[SIGNATURE] == expected, command.ext_fields
        assert signature_matches(command, secret_key)
