"""Two resources claiming one name: the older one (creation time, then name) owns it."""

from __future__ import annotations

from reconsume_operator.conflicts import Claim, claim_of, conflicting_owner, owner

T1 = "2025-01-01T10:00:00Z"
T2 = "2025-01-01T10:00:01Z"


def test_the_older_resource_owns_the_name() -> None:
    old, young = Claim(T1, "zeta"), Claim(T2, "alpha")
    assert owner([young, old]) == old
    assert conflicting_owner(young, [old, young]) == old
    assert conflicting_owner(old, [old, young]) is None


def test_same_creation_time_falls_back_to_the_name() -> None:
    a, b = Claim(T1, "a"), Claim(T1, "b")
    assert conflicting_owner(b, [a]) == a
    assert conflicting_owner(a, [b]) is None


def test_a_lone_claim_owns_its_name() -> None:
    mine = Claim(T1, "orders")
    assert conflicting_owner(mine, []) is None
    assert conflicting_owner(mine, [mine]) is None
    assert owner([]) is None


def test_claims_come_from_metadata() -> None:
    body = {"metadata": {"name": "orders", "creationTimestamp": T2}}
    assert claim_of(body) == Claim(T2, "orders")
