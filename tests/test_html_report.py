"""report.html: one self-contained page, checked in a real browser (Debian's Chromium driven by Playwright)
on the committed CPU reference (every approach, 1 and 2 slots), its report written by this code."""
import re
from pathlib import Path

import pytest

from bench.report import report
from bench.analysis import aggregate
from bench.results import ResultStore, load
from bench.analysis.folder import Folder
from helpers import REPO
from test_report import row

CHROMIUM = Path("/usr/bin/chromium")
# No network, no first-run work, nothing a sandbox-less container cannot do.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser_or_skip():
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium where apt runs as root")
    return playwright.sync_playwright


def test_the_page_carries_everything_it_shows(tmp_path):
    """No request leaves the file: plots inline, no external script, style or link; the verdict comes first."""
    store = ResultStore(tmp_path)
    for r in (row("torch-ddp", 1, 5000.0), row("torch-ddp", 2, 7000.0), row("torch-ddp", 2, 9000.0, independent=True),
              row("tf-mirrored", 2, 3000.0, framework="tensorflow-cpu")):
        store.append(r)
    report.write_report(Folder.read(tmp_path))
    page = (tmp_path / "report.html").read_text()
    assert not re.findall(r"""(?:src|href|url)\s*[=(]\s*["']?(?!data:|#)[a-z]+:""", page)
    assert page.count('src="data:image/png;base64,') == len(list(tmp_path.glob("*.png")))
    assert page.index("Verdict") < page.index("<table")
    assert "torch-ddp beats tf-mirrored by 2.33x" in page
    assert page.count('<tr class="main') == 3 and page.count('<tr class="twin') == 1  # the bound under its run


@pytest.fixture
def swept(tmp_path) -> Path:
    """The reference's rows in a folder of the test's own, its report as this code writes it."""
    import shutil

    out = tmp_path / "reference-cpu"
    shutil.copytree(REPO / "results" / "reference-cpu", out)
    report.write_report(Folder.read(out))
    return out


@pytest.mark.slow
def test_the_report_in_a_browser(swept, tmp_path):
    sync_playwright = browser_or_skip()
    configs = aggregate.configurations(load(swept))
    main_rows = sum(1 for k in configs["key"] if not (k.independent or k.input == "synthetic"))
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: errors.append(f"request {r.url}") if not r.url.startswith(("file:", "data:"))
                    else None)
            page.goto((swept / "report.html").as_uri())
            assert page.locator("h2").first.inner_text() == "Verdict"
            verdict = page.locator("ul.verdict").inner_text()
            assert "1 CPU slot, default task" in verdict and "torch-ddp" in verdict and "2 CPU slots" in verdict
            table = page.locator("table.results").first
            assert table.locator("tr.main").count() == main_rows
            # Whole rows: two configurations share a variant name, so names alone can read the same both ways.
            rows_shown = lambda: table.locator("tr.main").all_inner_texts()  # noqa: E731
            throughput = table.locator("th", has_text="throughput")
            throughput.locator("button").click()
            ascending = rows_shown()
            throughput.locator("button").click()
            descending = rows_shown()
            measured = lambda rows: [r for r in rows if r.split("\t")[3] == "ok"]  # noqa: E731
            assert measured(descending) == measured(ascending)[::-1] != measured(ascending)
            # A row without the figure (torch-dp on 2 slots is not applicable) stays below the measured, both ways.
            assert descending[len(measured(descending)):] == ascending[len(measured(ascending)):] != []
            assert throughput.get_attribute("aria-sort") == "descending"
            # On hover: each throughput's range over its 3 runs, the intervals of the figures drawn from it.
            measured_rows = table.locator("tbody tr:not(.skipped)").count()  # twins too; not torch-dp's n/a
            assert measured_rows > main_rows and table.locator("td[title*='range over runs']").count() == measured_rows
            assert table.locator("td[title^='interval']").count() > 0
            page.locator("input.filter").first.fill("torch-single")
            assert table.locator("tbody.group:visible").count() == 1
            page.locator("input.filter").first.fill("")
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            # The first screen of a laptop answers: every group's headline inside 1280x800, unscrolled.
            page.set_viewport_size({"width": 1280, "height": 800})
            page.evaluate("window.scrollTo(0, 0)")
            box = page.locator("div.headline").bounding_box()
            assert box and box["y"] >= 0 and box["y"] + box["height"] <= 800, box
            assert page.locator("div.headline p").count() == 2  # one a device count
            assert page.locator("div.headline p").first.inner_text().startswith("1 CPU slot, default task")
            page.screenshot(path=str(tmp_path / "first-screen.png"))
        finally:
            browser.close()
    assert errors == []
    assert (tmp_path / "report.png").stat().st_size > 50_000
