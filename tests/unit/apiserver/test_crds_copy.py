"""Embedded mode validates with the CRDs packaged in reconsume.apiserver: they must be those of
crds/ byte for byte, so that a manifest is judged by the same schema and rules as on a
cluster."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from reconsume.apiserver import crds

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted((ROOT / "crds").glob("*.reconsume.io.yaml"))
PACKAGED = resources.files("reconsume.apiserver").joinpath("crds")


def test_the_package_holds_exactly_the_crds_of_each_kind() -> None:
    packaged = sorted(entry.name for entry in PACKAGED.iterdir() if entry.is_file())
    assert packaged == sorted(path.name for path in SOURCES)
    assert len(packaged) == len(crds.KINDS) == 5


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_each_copy_is_byte_identical(source: Path) -> None:
    assert PACKAGED.joinpath(source.name).read_bytes() == source.read_bytes(), (
        f"broker_image/reconsume/apiserver/crds/{source.name} differs from crds/{source.name}; "
        f"copy it: cp crds/{source.name} broker_image/reconsume/apiserver/crds/"
    )


@pytest.mark.parametrize("kind", crds.KINDS)
def test_each_kind_loads_from_the_package(kind: str) -> None:
    crd = crds.crd(kind)
    assert crd["spec"]["names"]["kind"] == kind
    assert f"{crds.plural(kind)}.reconsume.io" == crd["metadata"]["name"]
    assert crds.short_names(kind)
    assert crds.root_schema(kind)["type"] == "object"
    assert f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}" == crds.API_VERSION


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind 'Queue'"):
        crds.crd("Queue")
