"""Media logged with run.log in the real browser: text and tables on the run page, by step, shown as
text and never as markup; several runs' images and histograms side by side on the compare page,
moved together by one slider (a run without the step picked shows its last one before it), the
histograms on one x range. Each item is uploaded as the SDK uploads it: an artifact at
media/<key>/<step><suffix> with its type and step."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import numpy as np
import pytest

from corral.client import Client
from corral.sdk.media import Histogram, Image
from tests.conftest import Server, _kill_leftover_supervisors
from tests.web.conftest import screenshot
from tests.web.test_login import REFUSED, REMOTE

SUFFIX = {"image": ".png", "histogram": ".hist.json", "text": ".txt", "table": ".table.json"}


@dataclass
class Site:
    server: Server
    client: Client
    scratch: str

    def url(self, path: str) -> str:
        return self.server.url + path

    def log(self, run: dict, key: str, step: int, type_: str, content: bytes, caption: str | None = None,
            client: Client | None = None) -> None:
        """What run.log({key: item}, step=step) uploads for an item of this type."""
        source = os.path.join(self.scratch, "item")
        with open(source, "wb") as f:
            f.write(content)
        (client or self.client).upload_artifact(run["id"], source, f"media/{key}/{step:08d}{SUFFIX[type_]}",
                                                type=type_, step=step, caption=caption)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    base = tempfile.mkdtemp(prefix="corral-web-media-", dir="/tmp")
    server = Server(home=os.path.join(base, "home")).start()
    try:
        yield Site(server, server.client(), base)
    finally:
        server.stop()
        _kill_leftover_supervisors(base)
        shutil.rmtree(base, ignore_errors=True)


def table(columns: list, rows: list) -> bytes:
    return json.dumps({"columns": columns, "rows": rows}).encode()


def test_the_run_page_shows_text_and_tables_by_step_as_text_never_markup(site, page):
    run = site.client.create_run(project="web-media", name="text and tables")
    hostile = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    first = "epoch 0: the model says hello\n"
    last = "".join(f"line {i}: {hostile}\n" for i in range(200))  # taller than its box: it scrolls
    site.log(run, "samples", 0, "text", first.encode())
    site.log(run, "samples", 3, "text", last.encode())
    site.log(run, "preds", 0, "table", table(["id", "label"], [[1, "cat"], [2, None]]))
    site.log(run, "preds", 3, "table", table(["id", "label", "p"], [[i, hostile if i == 0 else "dog", 0.125] for i in range(250)]))
    site.log(run, "transcript", 0, "text", ("x" * 1023 + "\n").encode() * 300)  # 300 KB: its start is shown
    site.log(run, "broken", 0, "table", b'{"rows": 3}')
    page.goto(site.url(f"/runs/{run['id']}"))

    text = page.locator("[data-testid=media-card][data-key=samples]")
    assert text.get_attribute("data-type") == "text"
    shown = text.locator("[data-testid=media-text][data-step='3']")
    shown.wait_for()  # the last step first
    assert shown.text_content() == last
    assert text.locator("[data-testid=media-step]").inner_text() == "step 3 (2 of 2)"
    assert shown.evaluate("pre => pre.scrollHeight > pre.clientHeight")
    text.locator("[data-testid=media-slider]").fill("0")
    assert text.locator("[data-testid=media-text][data-step='0']").text_content() == first

    tab = page.locator("[data-testid=media-card][data-key=preds]")
    assert tab.get_attribute("data-type") == "table"
    drawn = tab.locator("[data-testid=media-table][data-step='3']")
    drawn.wait_for()
    assert drawn.locator("thead th").all_inner_texts() == ["id", "label", "p"]
    assert drawn.locator("tbody tr").count() == 200 and drawn.get_attribute("data-rows") == "250"
    assert tab.locator("[data-testid=media-table-note]").inner_text() == "200 of 250 rows"
    assert drawn.locator("tbody tr").first.locator("td").all_inner_texts() == ["0", hostile, "0.125"]
    tab.locator("[data-testid=media-slider]").fill("0")
    earlier = tab.locator("[data-testid=media-table][data-step='0']")
    earlier.wait_for()
    assert [row.locator("td").all_inner_texts() for row in earlier.locator("tbody tr").all()] == [["1", "cat"], ["2", ""]]
    assert tab.locator("[data-testid=media-table-note]").count() == 0

    media = page.locator("[data-testid=media]")
    assert media.locator("script, img").count() == 0  # the hostile text is characters, never elements
    assert page.evaluate("window.pwned") is None
    long = page.locator("[data-testid=media-card][data-key=transcript]")
    assert long.locator("[data-testid=media-text]").text_content() == ("x" * 1023 + "\n") * 256
    assert "The first 256 KB of 300 KB" in long.locator("[data-testid=media-text-note]").inner_text()
    assert "not a table" in page.locator("[data-testid=media-card][data-key=broken] [data-testid=media-error]").inner_text()
    text.locator("[data-testid=media-slider]").fill("1")
    tab.locator("[data-testid=media-slider]").fill("1")
    tab.locator("[data-testid=media-table][data-step='3']").wait_for()
    tab.scroll_into_view_if_needed()
    screenshot(page, "run-media-text-table")


def test_the_compare_page_shows_runs_media_side_by_side_by_step(site, page):
    a = site.client.create_run(project="web-media", name="small init")
    b = site.client.create_run(project="web-media", name="large init")
    for step in (0, 5, 9):  # a: images at 0, 5, 9; weights from 0 to its step
        site.log(a, "samples", step, "image", Image(np.full((16, 24, 3), step * 25, np.uint8)).encode(), f"a {step}")
        site.log(a, "weights", step, "histogram", Histogram(np.arange(step + 1), bins=4).encode())
    for step in (4, 7):  # b: images from step 4 on; weights from 10 to 10 + 2 × its step
        site.log(b, "samples", step, "image", Image(np.full((16, 24, 3), 255 - step * 25, np.uint8)).encode(), f"b {step}")
        site.log(b, "weights", step, "histogram", Histogram(10 + 2 * np.arange(step + 1), bins=4).encode())
    site.log(b, "notes", 2, "text", b"only b writes notes")
    page.goto(site.url(f"/compare?runs={a['id']},{b['id']}"))

    samples = page.locator("[data-testid=media-row][data-key=samples]")
    cell_a = samples.locator(f"[data-testid=media-cell][data-run-id='{a['id']}']")
    cell_b = samples.locator(f"[data-testid=media-cell][data-run-id='{b['id']}']")
    cell_a.locator("[data-testid=media-image][data-step='9']").wait_for()  # the last step first
    cell_b.locator("[data-testid=media-image][data-step='7']").wait_for()  # b's last one before 9
    assert "step 7, the last before 9" in cell_b.inner_text()
    assert samples.locator("[data-testid=media-step]").inner_text() == "step 9 (5 of 5)"  # 0, 4, 5, 7, 9
    assert cell_b.locator("[data-testid=media-caption]").inner_text() == "b 7"

    slider = samples.locator("[data-testid=media-slider]")
    slider.fill("2")  # step 5
    cell_a.locator("[data-testid=media-image][data-step='5']").wait_for()
    cell_b.locator("[data-testid=media-image][data-step='4']").wait_for()
    slider.fill("0")  # step 0: b has none yet
    cell_a.locator("[data-testid=media-image][data-step='0']").wait_for()
    assert cell_b.locator("[data-testid=media-missing]").inner_text() == "no samples at step 0"
    assert cell_b.get_attribute("data-step") == "" and cell_b.locator("img").count() == 0
    assert samples.locator("[data-testid=media-step]").inner_text() == "step 0 (1 of 5)"

    weights = page.locator("[data-testid=media-row][data-key=weights]")
    assert weights.get_attribute("data-type") == "histogram"
    hist_a = weights.locator(f"[data-testid=media-cell][data-run-id='{a['id']}'] [data-testid=media-histogram]")
    hist_b = weights.locator(f"[data-testid=media-cell][data-run-id='{b['id']}'] [data-testid=media-histogram]")
    weights.locator(f"[data-testid=media-cell][data-run-id='{b['id']}'] [data-testid=media-histogram][data-step='7']").wait_for()
    # one x range, 0 (a's least) to 24 (b's most): a's bars on the left, b's on the right
    assert [(h.get_attribute("data-lo"), h.get_attribute("data-hi")) for h in (hist_a, hist_b)] == [("0", "24")] * 2
    ends_a = hist_a.locator("rect").evaluate_all("bars => bars.map(b => b.x.baseVal.value + b.width.baseVal.value)")
    starts_b = hist_b.locator("rect").evaluate_all("bars => bars.map(b => b.x.baseVal.value)")
    assert max(ends_a) < min(starts_b)
    assert sum(int(c) for c in hist_b.locator("rect").evaluate_all("bars => bars.map(b => b.dataset.count)")) == 8
    weights.locator("[data-testid=media-slider]").fill("2")  # step 5: b's last before it is 4
    weights.locator(f"[data-testid=media-cell][data-run-id='{b['id']}'] [data-testid=media-histogram][data-step='4']").wait_for()
    assert hist_a.get_attribute("data-step") == "5"
    assert (hist_a.get_attribute("data-lo"), hist_a.get_attribute("data-hi")) == ("0", "18")

    notes = page.locator("[data-testid=media-row][data-key=notes]")
    notes.locator("[data-testid=media-text]").wait_for()
    assert notes.locator(f"[data-testid=media-cell][data-run-id='{a['id']}'] [data-testid=media-missing]").inner_text() \
        == "no notes at step 2"
    samples.scroll_into_view_if_needed()
    screenshot(page, "compare-media")


@pytest.mark.skipif(os.geteuid() != 0, reason="real accounts need root; CI runs as root")
def test_compare_shows_the_media_of_the_runs_the_viewer_may_read(site, browser, os_users):
    """Another user's artifacts are theirs (README, Security model): their cells say so, the
    viewer's own runs' media still show."""
    with Client(home=site.server.home) as root:
        tokens = [root.create_token(user=user, scope="submit", expires="1h")["token"] for user in os_users[:2]]
    alice, bob = (Client(site.server.url, token=t) for t in tokens)
    hers, his = alice.create_run(project="web-media-2", name="hers"), bob.create_run(project="web-media-2", name="his")
    for run, client in ((hers, alice), (his, bob)):
        site.log(run, "samples", 1, "image", Image(np.zeros((8, 8), np.uint8)).encode(), client=client)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=REMOTE)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text)
                if msg.type == "error" and not REFUSED.fullmatch(msg.text) else None)
        path = f"/compare?runs={hers['id']},{his['id']}"
        page.goto(site.url(f"/login?next={quote(path, safe='')}#token={tokens[1]}"))
        row = page.locator("[data-testid=media-row][data-key=samples]")
        row.locator(f"[data-testid=media-cell][data-run-id='{his['id']}'] [data-testid=media-image]").wait_for()
        refused = row.locator(f"[data-testid=media-cell][data-run-id='{hers['id']}'] [data-testid=media-missing]")
        assert refused.inner_text().startswith("Its media could not be listed: ")
    finally:
        context.close()
    assert not errors, f"the page raised or logged errors: {errors}"
