"""/api/docs/ in a real headless Chromium: Swagger UI draws the schema's operations with no CSP violation."""

from __future__ import annotations

import pytest

from tests.browser_kit import chromium_page, needs_chromium, violations

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def test_the_reference_page_draws_every_operation_under_the_policy(asgi_server):
    from drf_spectacular.generators import SchemaGenerator

    # given the schema's operations
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = sum(len(item) for item in schema["paths"].values())
    with chromium_page() as (page, console):
        # when the page is opened
        page.goto(f"{asgi_server}/api/docs/")
        page.wait_for_selector(".opblock-summary-path[data-path='/api/v1/sessions']", timeout=15000)
        # then Swagger UI drew each operation, and the policy refused nothing
        assert page.locator(".opblock").count() == operations
        assert page.locator(".info .title").first.text_content().startswith("memdesk API")
        assert violations(page, console) == []
