"""Companion pages: plans, letters (locks decided by the service for the user's side) and the self-knowledge page."""

from __future__ import annotations

import pytest

from booku_memory.services.companion import BookuCompanionService

from .conftest import csrf_field

PAGES = ("/companion/plans", "/companion/letters", "/companion/self")
FUTURE = "2099-01-01"


def ai_side(memory) -> BookuCompanionService:
    """The companion service as the LLM tools build it: the runtime's default scope, the AI's side."""
    return BookuCompanionService(memory.runtime, memory.runtime.default_scope, side="ai")


@pytest.mark.parametrize("path", PAGES)
async def test_pages_redirect_to_login_when_not_logged_in(anon, path):
    response = await anon.get(path)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/login?")


async def test_ai_letters_under_lock_show_no_body_or_title_on_the_user_page(browser, memory):
    companion = ai_side(memory)
    timed = await companion.letter_write(
        "ai", "等到那天再告诉你 TIMED-BODY-5521", title="TIMED-TITLE-5521", lock_type="timed", unlock_date=FUTURE
    )
    sealed = await companion.letter_write(
        "ai", "谁也不会读到 SEALED-BODY-8830", title="SEALED-TITLE-8830", lock_type="permanent"
    )
    page = await browser.get("/companion/letters")
    assert page.status_code == 200
    assert timed["id"] in page.text and sealed["id"] in page.text
    for secret in ("TIMED-BODY-5521", "TIMED-TITLE-5521", "SEALED-BODY-8830", "SEALED-TITLE-8830"):
        assert secret not in page.text
    assert "永久封存" in page.text


async def test_user_letter_written_through_the_form_is_read_back(browser):
    token = csrf_field((await browser.get("/companion/letters")).text)
    response = await browser.post(
        "/companion/letters/write",
        data={
            "csrf_token": token,
            "title": "给未来",
            "content": "今天的晚霞很好看 USER-LETTER-1204",
            "lock_type": "none",
        },
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/companion/letters?notice=letter_written"
    page = await browser.get("/companion/letters")
    assert "USER-LETTER-1204" in page.text and "给未来" in page.text
    assert "信已写下" in (await browser.get(response.headers["location"])).text


async def test_user_permanent_letter_never_shows_its_body_even_to_the_user(browser):
    refused = await browser.post(
        "/companion/letters/write",
        data={"csrf_token": browser.csrf, "content": "封存的心事 PERM-USER-3391", "lock_type": "permanent"},
    )
    assert refused.status_code == 400
    assert "我明白永久封存无法撤销" in refused.text
    written = await browser.post(
        "/companion/letters/write",
        data={
            "csrf_token": browser.csrf,
            "content": "封存的心事 PERM-USER-3391",
            "lock_type": "permanent",
            "confirm_permanent": "1",
        },
    )
    assert written.status_code == 303
    page = await browser.get("/companion/letters")
    assert "PERM-USER-3391" not in page.text
    assert "永久封存：谁都读不到正文" in page.text


async def test_user_timed_letter_stays_readable_to_the_user(browser, memory):
    await browser.post(
        "/companion/letters/write",
        data={
            "csrf_token": browser.csrf,
            "content": "明年的我 TIMED-USER-6612",
            "lock_type": "timed",
            "unlock_date": FUTURE,
        },
    )
    assert "TIMED-USER-6612" in (await browser.get("/companion/letters")).text
    ai_view = await ai_side(memory).letter_read()
    assert ai_view["items"][0]["readable"] is False


async def test_lock_change_of_the_ai_letter_is_refused_with_the_service_message(browser, memory):
    letter = await ai_side(memory).letter_write("ai", "AI 写的信", lock_type="timed", unlock_date=FUTURE)
    response = await browser.post(
        f"/companion/letters/{letter['id']}/lock", data={"csrf_token": browser.csrf, "lock_type": "none"}
    )
    assert response.status_code == 400
    assert "只有写这封信的一方能改它的锁" in response.text
    assert (await ai_side(memory).letter_read())["items"][0]["lock_type"] == "timed"


async def test_lock_change_of_an_own_letter_goes_through_the_service(browser, memory):
    written = await BookuCompanionService(memory.runtime, None, side="user").letter_write(
        "user", "先锁上 OWN-LOCK-7740", lock_type="timed", unlock_date=FUTURE
    )
    assert (await ai_side(memory).letter_read())["items"][0]["readable"] is False
    response = await browser.post(
        f"/companion/letters/{written['id']}/lock", data={"csrf_token": browser.csrf, "lock_type": "none"}
    )
    assert response.status_code == 303
    assert response.headers["location"].endswith("notice=lock_changed")
    opened = (await ai_side(memory).letter_read())["items"][0]
    assert opened["readable"] is True and opened["content"] == "先锁上 OWN-LOCK-7740"


async def test_script_in_a_letter_renders_as_text(browser, memory):
    await ai_side(memory).letter_write("ai", "<script>alert('x')</script>", title="<b>标题</b>")
    page = await browser.get("/companion/letters")
    assert "<script>alert" not in page.text and "<b>标题</b>" not in page.text
    assert "&lt;script&gt;alert(" in page.text
    assert "&lt;b&gt;标题&lt;/b&gt;" in page.text


@pytest.mark.parametrize(
    "path, data",
    [
        ("/companion/letters/write", {"content": "没有令牌的信 NO-CSRF-4410", "lock_type": "none"}),
        ("/companion/letters/abcdefabcdef/lock", {"lock_type": "none"}),
        ("/companion/plans/whatever/status", {"status": "resolved"}),
    ],
)
async def test_posts_require_the_csrf_token(browser, memory, path, data):
    response = await browser.post(path, data=data)
    assert response.status_code == 403
    forged = await browser.post(path, data={**data, "csrf_token": "forged-token"})
    assert forged.status_code == 403
    letters = await BookuCompanionService(memory.runtime, None, side="user").letter_read()
    assert letters["total"] == 0


async def test_plans_are_listed_and_their_status_changes_through_trace(browser, memory):
    companion = ai_side(memory)
    event = await companion.hold("上周和小林约好一起去爬山，她很期待")
    plan = await companion.plan(
        "周六陪小林去爬香山 PLAN-BODY-2231", related_bucket=event["id"], weight=0.8, why_remembered="答应过她 WHY-9920"
    )
    page = await browser.get("/companion/plans")
    assert page.status_code == 200
    for shown in ("PLAN-BODY-2231", "WHY-9920", event["id"], "0.80", "进行中"):
        assert shown in page.text
    response = await browser.post(
        f"/companion/plans/{plan['id']}/status", data={"csrf_token": browser.csrf, "status": "resolved"}
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/companion/plans?notice=plan_status"
    resolved = await browser.get("/companion/plans?status=resolved")
    assert "PLAN-BODY-2231" in resolved.text
    assert "PLAN-BODY-2231" not in (await browser.get("/companion/plans?status=active")).text
    dream = await companion.dream()
    assert "PLAN-BODY-2231" not in dream["text"]


async def test_plan_status_refusal_shows_the_service_message(browser, memory):
    plan = await ai_side(memory).plan("给妈妈打电话")
    response = await browser.post(
        f"/companion/plans/{plan['id']}/status", data={"csrf_token": browser.csrf, "status": "done"}
    )
    assert response.status_code == 400
    assert "status 取值" in response.text
    missing = await browser.post(
        "/companion/plans/no-such-plan/status", data={"csrf_token": browser.csrf, "status": "resolved"}
    )
    assert missing.status_code == 404


async def test_self_page_shows_candidates_with_their_witnesses(browser, memory):
    companion = ai_side(memory)
    await companion.self_knowledge(content="我觉得我在深夜更容易说真话 SELF-CAND-3012", aspect="patterns")
    await companion.dream()
    page = await browser.get("/companion/self")
    assert page.status_code == 200
    assert "SELF-CAND-3012" in page.text
    assert "规律" in page.text
    assert "见证 1/3" in page.text
    assert "还没有正式条目" in page.text
