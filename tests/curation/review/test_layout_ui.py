"""A real browser: the annotator signs in and the annotation page lists the pushed records."""

from __future__ import annotations

import base64

import pytest

from tests.curation.review.browser import Browser, find_chromium
from tests.curation.review.conftest import fill_store, push_records, spec_copy


def test_annotation_page_lists_pushed_records(argilla, tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.fail("headless Chromium is needed for this check: apt-get update && apt-get install -y chromium")
    spec = spec_copy(tmp_path, "review-ui")
    store_dir = tmp_path / "store"
    fill_store(store_dir, spec)
    summary = push_records(argilla, spec, store_dir, "all")

    browser = Browser(chromium, tmp_path / "chromium-profile")
    try:
        user = argilla.creds["annotator"]
        auth = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        browser.goto(f"{argilla.url}/sign-in?auth={auth}")  # the sign-in page logs in from ?auth=base64(user:pass)
        home = browser.wait_for("location.pathname !== '/sign-in' && document.body.innerText.includes('review-ui@1')"
                                " && document.body.innerText")
        assert home and "review-ui@1" in home, f"the annotator's home page does not list the dataset: {home!r}"

        browser.goto(f"{argilla.url}/dataset/{summary.dataset_id}/annotation-mode")
        page = browser.wait_for("document.body.innerText.includes('Corrected plan') && document.body.innerText")
        assert page, browser.eval("document.body.innerText")
        assert "pending" in page.lower() and "of 5" in page  # the queue: 1 of 5 pending
        assert any(q in page for q in ("Compute (4580 - 1275)", "Write a Tetris clone", "Summarise the plot",
                                       "Was ergibt 98.765", "Heizwärmebedarf"))
        for title in ("Request", "Teacher's plan", "Categories shown to the teacher", "Automatic checks",
                      "Is the teacher's plan right?", "Corrected plan (JSON)", "Submit", "Discard"):
            assert title in page, title
    finally:
        browser.close()
