"""The admin speaks the staff member's language: their saved choice first, then the browser's; switching in the
admin's header (/i18n/setlang/) saves the choice."""

from __future__ import annotations

import pytest
from django.test import Client

from staff_auth.models import StaffPreference
from tests.factories import open_session_obj, staff_login, write_memory

CHINESE = "zh-Hans,zh;q=0.9"
#: A memory's embedding, given so that no test loads the embedding model.
VECTOR = [0.0] * 383 + [1.0]


@pytest.fixture
def remembered(acme):
    """One of acme's memories: the changelist shows its actions only when it lists something."""
    return write_memory(
        acme, open_session_obj(acme, "alice"), "用户姓名 张伟", type="user_profile", key="name", embedding=VECTOR
    )


def test_a_chinese_browser_gets_the_admin_and_the_memory_list_in_chinese(staff, remembered):
    # given acme's owner, whose browser asks for Chinese
    client = staff_login(staff["owner_a"], CHINESE)
    # when they open the admin and memdesk's list of memories
    index = client.get("/admin/")
    memories = client.get("/admin/memory/memoryunit/")
    # then Django's admin and memdesk's own names, columns and actions are Chinese
    assert index["Content-Language"] == "zh-hans"
    assert "站点管理" in index.content.decode()  # Django's catalogue: "Site administration"
    assert "记忆" in index.content.decode()  # memdesk's: the memory app
    html = memories.content.decode()
    assert memories["Content-Language"] == "zh-hans"
    assert "相关度分数" in html  # a column title of memdesk's admin (relevance score)
    assert "立即过期" in html  # an action (Expire now)
    assert "Expire now" not in html
    assert "用户画像" in html  # the memory's type (User profile)


def test_a_saved_english_preference_wins_over_a_chinese_browser(staff, remembered):
    # given the owner chose English, on a browser that asks for Chinese
    StaffPreference.objects.create(user=staff["owner_a"], language="en")
    client = staff_login(staff["owner_a"], CHINESE)
    # when
    memories = client.get("/admin/memory/memoryunit/")
    # then
    html = memories.content.decode()
    assert memories["Content-Language"] == "en"
    assert "Expire now" in html
    assert "立即过期" not in html


def test_switching_in_the_admin_saves_the_choice_for_every_browser(staff):
    # given the owner on an English browser
    client = staff_login(staff["owner_a"], "en-US,en;q=0.9")
    # when they choose Chinese in the admin's header
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/admin/"})
    # then they are back on the page, the choice is saved, and another English browser gets Chinese
    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert StaffPreference.objects.get(user=staff["owner_a"]).language == "zh-hans"
    elsewhere = staff_login(staff["owner_a"], "en-US,en;q=0.9").get("/admin/")
    assert elsewhere["Content-Language"] == "zh-hans"


def test_the_header_offers_each_language_and_marks_the_current_one(staff):
    # when
    html = staff_login(staff["agent_a"], CHINESE).get("/admin/").content.decode()
    # then: a form to /i18n/setlang/ with one button per language, the current one pressed
    assert 'id="mdk-language"' in html
    assert 'action="/i18n/setlang/"' in html
    assert 'value="en"' in html
    assert 'value="zh-hans" lang="zh-hans"' in html
    assert 'aria-pressed="true" disabled>简体中文' in html


def test_an_unknown_language_is_not_saved(staff):
    # given
    client = staff_login(staff["owner_a"], CHINESE)
    # when
    client.post("/i18n/setlang/", {"language": "xx", "next": "/admin/"})
    # then
    assert not StaffPreference.objects.filter(user=staff["owner_a"]).exists()


def test_someone_signed_out_switches_the_sign_in_page_without_a_saved_choice(db):
    # given a browser that asks for Chinese, signed out
    client = Client(headers={"accept-language": CHINESE})
    # when they choose English on the sign-in page
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/admin/login/"})
    login = client.get("/admin/login/")
    # then the cookie carries it, and nothing is stored
    assert response.status_code == 302
    assert login["Content-Language"] == "en"
    assert not StaffPreference.objects.exists()
