"""Generate the Python modules of Apache RocketMQ's gRPC protocol (apache.rocketmq.v2) into
``broker_image/reconsume/wire/v2/`` from the published .proto files.

The .proto files are apache/rocketmq-apis' as Apache RocketMQ's Node.js client publishes them
on npm (``rocketmq-client-nodejs``, its ``proto/apache/rocketmq/v2/``): the one package
registry here that serves the files themselves. The tarball is fetched from the npm registry
(cached under ``~/.cache/reconsume/protos``) and checked against the sha512 the registry lists
for that version, then compiled with grpcio-tools' protoc. Only the import paths between the
files are rewritten (so the modules import each other as ``reconsume.wire.v2``); the proto
package, and so every message and method name on the wire, stays ``apache.rocketmq.v2``.

The generated modules are not in the repository (.gitignore): ``make`` runs this after
installing the virtual environment, the Dockerfile before building its wheels. Running it again
does nothing while the version stamp matches.

    python tools/gen_protos.py            # generate if missing or stale
    python tools/gen_protos.py --force    # generate again
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

PACKAGE = "rocketmq-client-nodejs"
VERSION = "1.0.8"
TARBALL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
INTEGRITY = (
    "sha512-qSzgN9/oFy+iqGIbXoAdY4L/hcAGDq1PqOk4/zXs3Jz6bxsGRL3GA5QSOFS1nVUtFzGTiPyHEz4f/"
    "ITloCWEJg=="
)
PROTOS = ("definition.proto", "service.proto")
"""service.proto imports definition.proto; admin.proto (the proxy's log-level call) is not
served."""
SOURCE_DIR = "package/proto/apache/rocketmq/v2/"
ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOT = ROOT / "broker_image"
TARGET = PACKAGE_ROOT / "reconsume" / "wire" / "v2"
STAMP = TARGET / ".generated"
CACHE = Path(os.environ.get("RECONSUME_CACHE_DIR", Path.home() / ".cache" / "reconsume")) / "protos"

_IMPORT = re.compile(r'^import "apache/rocketmq/v2/([a-z_]+\.proto)";', re.MULTILINE)
_INIT = '''"""Apache RocketMQ's gRPC protocol, apache.rocketmq.v2, generated from the published
.proto files by tools/gen_protos.py ({package} {version}). Not edited by hand; not in the
repository."""
'''


def _check(data: bytes) -> None:
    algorithm, _, expected = INTEGRITY.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise SystemExit(f"{TARBALL}: {algorithm} {actual} is not the registry's {expected}")


def tarball() -> bytes:
    """The npm tarball, from the cache or the registry, checked."""
    cached = CACHE / f"{PACKAGE}-{VERSION}.tgz"
    if cached.exists():
        data = cached.read_bytes()
        try:
            _check(data)
        except SystemExit:
            cached.unlink()
        else:
            return data
    with urllib.request.urlopen(TARBALL, timeout=120) as response:
        data = response.read()
    _check(data)
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(cached)
    return data


def sources(data: bytes) -> dict[str, str]:
    """The .proto files used, by name, with their imports made ``reconsume/wire/v2/...``."""
    found: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for name in PROTOS:
            member = archive.extractfile(SOURCE_DIR + name)
            if member is None:
                raise SystemExit(f"{PACKAGE} {VERSION} has no {SOURCE_DIR}{name}")
            text = member.read().decode()
            found[name] = _IMPORT.sub(r'import "reconsume/wire/v2/\1";', text)
    return found


def generate() -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]  # build-time only

    protos = sources(tarball())
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as scratch:
        stage = Path(scratch) / "stage"
        out = Path(scratch) / "out"
        (stage / "reconsume" / "wire" / "v2").mkdir(parents=True)
        out.mkdir()
        for name, text in protos.items():
            (stage / "reconsume" / "wire" / "v2" / name).write_text(text)
        arguments = [
            "protoc",
            f"-I{stage}",
            f"-I{include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            *(f"reconsume/wire/v2/{name}" for name in PROTOS),
        ]
        if protoc.main(arguments) != 0:
            raise SystemExit("protoc failed: " + " ".join(arguments))
        generated = out / "reconsume" / "wire" / "v2"
        (generated / "__init__.py").write_text(_INIT.format(package=PACKAGE, version=VERSION))
        (generated / "py.typed").write_text("")
        (generated / STAMP.name).write_text(f"{PACKAGE} {VERSION}\n")
        if TARGET.exists():
            shutil.rmtree(TARGET)
        shutil.copytree(generated, TARGET)


def up_to_date() -> bool:
    return STAMP.exists() and STAMP.read_text().strip() == f"{PACKAGE} {VERSION}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="generate even if up to date")
    args = parser.parse_args(argv)
    if args.force or not up_to_date():
        generate()
        print(f"generated {TARGET.relative_to(ROOT)} from {PACKAGE} {VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
