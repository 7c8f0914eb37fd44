"""Every request code the name server serves has an access decision: admin, or open."""

from __future__ import annotations

import asyncio

from reconsume.namesrv.access import NAMESRV_ADMIN_CODES, NAMESRV_OPEN_CODES
from reconsume.namesrv.server import NameServer
from reconsume.wire.codes import RequestCode


def served_codes() -> set[int]:
    async def build() -> set[int]:
        # The server's dispatcher is made with it; nothing listens until start().
        dispatcher = NameServer().server.dispatcher
        return {code for code in RequestCode if dispatcher.handler(code) is not None}

    return asyncio.run(build())


def test_every_served_code_has_a_decision() -> None:
    undecided = served_codes() - (NAMESRV_ADMIN_CODES | NAMESRV_OPEN_CODES)
    assert not undecided, f"served without an access decision: {sorted(undecided)}"


def test_the_decisions_are_disjoint_and_name_served_codes() -> None:
    assert not NAMESRV_ADMIN_CODES & NAMESRV_OPEN_CODES
    assert served_codes() >= (NAMESRV_ADMIN_CODES | NAMESRV_OPEN_CODES)


def test_what_changes_routes_needs_an_admin() -> None:
    assert {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
    } <= NAMESRV_ADMIN_CODES
