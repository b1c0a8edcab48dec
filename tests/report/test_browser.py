"""report.html in a real browser: the report of the tiny pipeline grid opened in Chromium,
driven by Playwright through the system's browser (`make browser` installs Debian's).

Without a Chromium the test skips with one line saying how to get one; CI sets
OFFLOADBENCH_REQUIRE_BROWSER=1, so there it fails instead of skipping.
"""

import math
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from offloadbench.report.text.decisions import decision_words

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("OFFLOADBENCH_ARTIFACTS", ROOT / "test-artifacts"))
# As root on a closed network: no sandbox, and none of Chromium's own connections.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("tiny_run")]  # one worker runs the tiny grid once


def chromium() -> str:
    path = os.environ.get("CHROMIUM") or next(
        (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None)
    if path:
        return path
    why = "no Chromium: `make browser` installs Debian's (as root), or set CHROMIUM=<path>"
    if os.environ.get("OFFLOADBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def page(tiny_run):
    """The tiny run's report.html loaded in Chromium, with what it logged and asked for."""
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make test installs it)")
    executable = chromium()
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        seen = {"errors": [], "requests": []}
        page.on("console", lambda message: seen["errors"].append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: seen["errors"].append(str(error)))
        page.on("request", lambda request: seen["requests"].append(request.url))
        page.goto((tiny_run["out"] / "report.html").as_uri())
        page.wait_for_load_state("load")
        yield page, seen
        browser.close()


def test_every_image_loads_with_alt_text_in_a_captioned_figure(page):
    page, seen = page
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.naturalWidth, e.alt, !!e.closest('figure')])")
    assert len(images) >= 7
    assert all(width > 0 and len(alt) > 20 and in_figure for width, alt, in_figure in images), images
    assert page.locator("figure > figcaption").count() == len(images)
    assert not seen["errors"], seen["errors"]


def test_it_opens_offline_and_asks_for_nothing_outside_itself(page):
    page, seen = page
    outside = [url for url in seen["requests"] if not url.startswith(("file:", "data:"))]
    assert not outside and page.locator("script").count() == 0
    assert page.locator("link[rel=stylesheet], link[rel=preload]").count() == 0


def test_every_contents_link_lands_on_a_heading(page):
    page, _ = page
    links = page.eval_on_selector_all("nav.toc a", "els => els.map(e => e.getAttribute('href'))")
    assert len(links) >= 10 and all(href.startswith("#") for href in links)
    for href in links:
        page.click(f"nav.toc a[href='{href}']")
        target = page.evaluate("() => { const t = document.querySelector(':target'); "
                               "return t && [t.tagName, t.getBoundingClientRect().top] }")
        assert target is not None and target[0] == "H2", (href, target)
        assert -2 <= target[1] < 900 and page.locator(href).is_visible(), href  # in view, though maybe folded


def test_the_decision_table_holds_the_numbers_of_decisions_csv_and_links_each_op(page, tiny_run):
    page, _ = page
    decisions = pd.read_csv(tiny_run["out"] / "decisions.csv", dtype={"threads": str})
    rows = page.eval_on_selector_all("table.decisions tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.innerText))")
    headers = page.eval_on_selector_all("table.decisions thead th", "cells => cells.map(c => c.innerText)")
    assert len(rows) == len(decisions) > 0
    column = {name: headers.index(name) for name in ("op", "decision", "at n", "speedup (95% CI)")}
    for cells, (_, row) in zip(rows, decisions.iterrows(), strict=True):
        assert cells[column["op"]] == row["op"] and cells[column["decision"]] == decision_words(row)
        assert int(cells[column["at n"]]) == int(row["size"])
        shown = cells[column["speedup (95% CI)"]]
        if not math.isfinite(row["speedup"]):
            assert shown == "–"
        elif row["speedup_ci_high"] / row["speedup_ci_low"] > 2:
            assert "spans" in shown and f"{row['speedup']:.2f}" not in shown
        else:
            numbers = [float(x) for x in re.findall(r"\d+\.\d+", shown)]
            expected = [round(row[c], 2) for c in ("speedup", "speedup_ci_low", "speedup_ci_high")]
            assert numbers == pytest.approx(expected, abs=0.006), (shown, expected)
    for href in page.eval_on_selector_all("table.decisions tbody td:first-child a", "as => as.map(a => a.getAttribute('href'))"):
        heading = page.locator(href)
        assert heading.count() == 1 and heading.evaluate("e => e.tagName") == "H3"
        assert heading.evaluate("e => e.closest('details') !== null")  # each op's details, folded


def test_detail_sections_are_folded_and_print_unfolded(page):
    page, _ = page
    folded = page.locator("details")
    assert folded.count() >= 5 and page.locator("details[open]").count() == 0
    inside = page.locator("details").first.locator(":scope > :not(summary)").first
    assert not inside.is_visible()
    page.emulate_media(media="print")
    try:
        assert inside.is_visible()
        assert page.locator("nav.toc").is_hidden()
    finally:
        page.emulate_media(media="screen")


def test_a_full_page_screenshot_is_left_to_look_at(page):
    page, _ = page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-full-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")
