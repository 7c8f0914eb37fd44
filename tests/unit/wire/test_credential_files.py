"""Credentials from a mounted Secret's files: read at start, read again after a change (the
kubelet's swap of a symbolic link included), kept when the files do not read, and what a
client signs with when given nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconsume.errors import InvalidArgumentError
from reconsume.wire.command import RemotingCommand
from reconsume.wire.credential_files import (
    CREDENTIALS_DIR_ENV,
    CredentialFiles,
    environment_signer,
    read_credentials,
)
from reconsume.wire.signing import (
    ACCESS_KEY,
    ACCESS_KEY_ENV,
    SECRET_KEY_ENV,
    Credentials,
    signature_matches,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def mounted(root: Path, version: str, access_key: str, secret_key: str) -> None:
    """Write ``root`` as the kubelet writes a Secret volume: the files in a directory of their
    own, ``..data`` a link to it, each key a link through ``..data``; an update swaps
    ``..data``."""
    data = root / f"..{version}"
    data.mkdir()
    (data / "accessKey").write_text(access_key + "\n")
    (data / "secretKey").write_text(secret_key)
    link = root / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, root / "..data")
    for name in ("accessKey", "secretKey"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")


def request() -> RemotingCommand:
    return RemotingCommand.request(10, {"topic": "orders"}, b"body")


def test_the_files_are_read_at_start_and_white_space_is_dropped(tmp_path: Path) -> None:
    mounted(tmp_path, "1", "orders-team", "secret-one")
    files = CredentialFiles(tmp_path)
    assert files.credentials == Credentials("orders-team", "secret-one")
    signed = request()
    files.sign(signed)
    assert signed.ext_fields[ACCESS_KEY] == "orders-team"
    assert signature_matches(signed, "secret-one")


def test_a_rotated_secret_is_used_after_the_next_check(tmp_path: Path) -> None:
    mounted(tmp_path, "1", "orders-team", "secret-one")
    clock = Clock()
    files = CredentialFiles(tmp_path, check_interval_s=1.0, clock=clock)
    mounted(tmp_path, "2", "orders-team-2", "secret-two")
    clock.now = 0.5
    assert files.current().access_key == "orders-team"  # no look before the interval
    clock.now = 1.0
    assert files.current() == Credentials("orders-team-2", "secret-two")
    assert files.reloads == 1


def test_files_that_do_not_read_keep_the_credentials_in_force(tmp_path: Path) -> None:
    mounted(tmp_path, "1", "orders-team", "secret-one")
    clock = Clock()
    files = CredentialFiles(tmp_path, clock=clock)
    (tmp_path / "..1" / "secretKey").write_text("   ")
    clock.now = 2.0
    assert files.current() == Credentials("orders-team", "secret-one")
    (tmp_path / "..1" / "secretKey").write_text("secret-three")
    clock.now = 4.0
    assert files.current() == Credentials("orders-team", "secret-three")


def test_missing_files_at_start_are_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "accessKey").write_text("orders-team")
    with pytest.raises(InvalidArgumentError, match="secretKey is missing"):
        read_credentials(tmp_path)


def test_a_security_token_file_is_optional(tmp_path: Path) -> None:
    (tmp_path / "accessKey").write_text("orders-team")
    (tmp_path / "secretKey").write_text("secret-one")
    (tmp_path / "securityToken").write_text("token")
    assert read_credentials(tmp_path).security_token == "token"


def test_the_environment_signer_prefers_the_credentials_directory(tmp_path: Path) -> None:
    mounted(tmp_path, "1", "from-files", "secret-one")
    keys = {ACCESS_KEY_ENV: "from-env", SECRET_KEY_ENV: "secret-env"}
    signer = environment_signer({CREDENTIALS_DIR_ENV: str(tmp_path), **keys})
    assert signer is not None
    signed = request()
    signer(signed)
    assert signed.ext_fields[ACCESS_KEY] == "from-files"
    signer = environment_signer(keys)
    assert signer is not None
    signed = request()
    signer(signed)
    assert signed.ext_fields[ACCESS_KEY] == "from-env"
    assert environment_signer({}) is None
