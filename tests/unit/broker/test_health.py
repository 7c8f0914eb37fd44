"""Readiness: what /readyz answers in each state."""

from __future__ import annotations

from reconsume.broker.health import Readiness, readiness


def test_recovering_store_is_not_ready() -> None:
    state = readiness(store_open=False, namesrv_addresses=(), registrations=0, stopping=False)
    assert state == Readiness(False, "store recovering")


def test_without_name_servers_an_open_store_is_enough() -> None:
    state = readiness(store_open=True, namesrv_addresses=(), registrations=0, stopping=False)
    assert state == Readiness(True, "ok")


def test_with_name_servers_one_registration_is_needed() -> None:
    addresses = ("127.0.0.1:9876", "127.0.0.1:9877")
    waiting = readiness(
        store_open=True, namesrv_addresses=addresses, registrations=0, stopping=False
    )
    assert not waiting.ready
    assert "127.0.0.1:9876;127.0.0.1:9877" in waiting.reason
    registered = readiness(
        store_open=True, namesrv_addresses=addresses, registrations=1, stopping=False
    )
    assert registered.ready


def test_shutting_down_wins_over_everything() -> None:
    state = readiness(store_open=True, namesrv_addresses=(), registrations=3, stopping=True)
    assert state == Readiness(False, "shutting down")


def test_a_refused_registration_is_said_with_the_reason_for_not_being_ready() -> None:
    state = readiness(
        store_open=True,
        namesrv_addresses=("ns:9876",),
        registrations=0,
        stopping=False,
        last_refusal="ns:9876 answered 16 request code 103 (REGISTER_BROKER) carries no AccessKey",
    )
    assert not state.ready
    assert state.reason == (
        "not registered with any name server yet (ns:9876); last refusal: ns:9876 answered 16 "
        "request code 103 (REGISTER_BROKER) carries no AccessKey"
    )
