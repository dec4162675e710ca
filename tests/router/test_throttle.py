"""Guessing the dashboard key or the MCP token: wrong guesses are slowed per credential surface, whatever address
they come from, and the right secret is never refused or delayed (all local clients share 127.0.0.1).

Times are only ever asserted as lower bounds (a guess flood takes at least so long), which load cannot break.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from booku_memory.mcp_server.http_transport import StaticTokenVerifier
from booku_memory.router.throttle import GuessThrottle

from .conftest import API_KEY, csrf_field

WRONG = "wrong-key-0123456789abcdefghij"
STEP = 0.2


def _quick_throttle(free: int = 3) -> GuessThrottle:
    return GuessThrottle(free_failures=free, base_delay=STEP, max_delay=STEP)


def _client(app, **kwargs) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", **kwargs)


def test_the_delay_grows_past_the_free_budget_and_stays_bounded():
    throttle = GuessThrottle(free_failures=10, base_delay=0.25, max_delay=2.0)
    assert [throttle.delay_for(n) for n in (1, 10, 11, 12, 13, 14, 15, 1000)] == [0, 0, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0]


async def test_a_flood_of_wrong_keys_is_answered_one_at_a_time(dashboard_app):
    dashboard_app.state.auth.guesses = _quick_throttle()
    async with _client(dashboard_app, headers={"X-API-Key": WRONG}) as guesser:
        for _ in range(3):  # the free budget: a typo costs nothing
            assert (await guesser.get("/api/status")).status_code == 401
        started = time.monotonic()
        answers = await asyncio.gather(*(guesser.get("/api/status") for _ in range(10)))
        elapsed = time.monotonic() - started
    assert all(answer.status_code == 401 for answer in answers)
    assert elapsed >= 10 * STEP * 0.95  # ten parallel guesses took as long as ten in a row


async def test_the_right_key_passes_at_once_while_wrong_guesses_queue(dashboard_app):
    dashboard_app.state.auth.guesses = _quick_throttle(free=0)
    async with (
        _client(dashboard_app, headers={"X-API-Key": WRONG}) as guesser,
        _client(dashboard_app, headers={"X-API-Key": API_KEY}) as operator,
    ):
        flood = [asyncio.create_task(guesser.get("/api/status")) for _ in range(20)]
        await asyncio.sleep(STEP)  # the flood is queued behind the throttle
        answer = await operator.get("/api/status")
        assert answer.status_code == 200
        still_waiting = sum(not task.done() for task in flood)
        assert still_waiting >= 10  # the operator did not wait for the queue
        await asyncio.gather(*flood)


async def test_wrong_logins_never_lock_the_operator_out(dashboard_app, anon):
    dashboard_app.state.auth.guesses = _quick_throttle()
    for _ in range(15):  # more than the old per-address lock-out (10), all from the same address
        page = await anon.get("/login")
        wrong = await anon.post("/login", data={"api_key": WRONG, "csrf_token": csrf_field(page.text)})
        assert wrong.status_code == 401
    page = await anon.get("/login")
    right = await anon.post("/login", data={"api_key": API_KEY, "csrf_token": csrf_field(page.text)})
    assert right.status_code == 303
    assert (await anon.get("/api/status")).status_code == 200


async def test_login_form_and_key_header_share_one_budget(dashboard_app, anon):
    dashboard_app.state.auth.guesses = _quick_throttle(free=2)
    for _ in range(2):
        page = await anon.get("/login")
        await anon.post("/login", data={"api_key": WRONG, "csrf_token": csrf_field(page.text)})
    async with _client(dashboard_app, headers={"X-API-Key": WRONG}) as guesser:
        started = time.monotonic()
        await guesser.get("/api/status")
        assert time.monotonic() - started >= STEP * 0.95  # the header guess pays for the form's failures


async def test_wrong_mcp_tokens_are_slowed_and_the_right_one_is_not():
    token = "mcp-token-0123456789abcdefghijkl"
    verifier = StaticTokenVerifier(token, _quick_throttle(free=2))
    started = time.monotonic()
    wrong = await asyncio.gather(*(verifier.verify_token(token[:-1] + "x") for _ in range(8)))
    assert wrong == [None] * 8
    assert time.monotonic() - started >= 6 * STEP * 0.95
    flood = [asyncio.create_task(verifier.verify_token("guess")) for _ in range(10)]
    await asyncio.sleep(0)
    accepted = await verifier.verify_token(token)
    assert accepted is not None and accepted.token == token
    assert sum(not task.done() for task in flood) >= 9
    await asyncio.gather(*flood)
