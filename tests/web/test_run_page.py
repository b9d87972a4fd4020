"""The run page in the real browser: artifacts downloadable from their links, rename, notes
(Markdown, rendered safely), tags, archive and delete after a confirmation, for the run's owner
or an admin; another user gets no controls and no artifacts (two real accounts, logged in with
tokens from a browser on another machine)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from corral.client import Client
from tests.conftest import Server, _kill_leftover_supervisors
from tests.web.conftest import screenshot
from tests.web.test_login import REFUSED, REMOTE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")


@dataclass
class Setup:
    server: Server
    tokens: dict[str, str]

    def url(self, path: str) -> str:
        return self.server.url + path

    def as_user(self, name: str) -> Client:
        return Client(self.server.url, token=self.tokens[name])


@pytest.fixture(scope="module")
def setup(os_users) -> Iterator[Setup]:
    base = tempfile.mkdtemp(prefix="corral-web-run-", dir="/tmp")
    os.chmod(base, 0o711)
    home = os.path.join(base, "home")
    server = Server(home=home).start()
    try:
        with Client(home=home) as root:
            tokens = {user: root.create_token(user=user, scope="submit", expires="1h")["token"] for user in os_users}
        yield Setup(server, {"alice": tokens[os_users[0]], "bob": tokens[os_users[1]]})
    finally:
        server.stop()
        _kill_leftover_supervisors(home)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def open_page(browser) -> Iterator[Callable[..., object]]:
    """A fresh browser context (remote=True: as from another machine, which must log in)."""
    contexts, errors = [], []

    def open_(remote: bool = False):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB", accept_downloads=True,
                                      extra_http_headers=REMOTE if remote else {})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text)
                if msg.type == "error" and not REFUSED.fullmatch(msg.text) else None)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert not errors, f"the page raised or logged errors: {errors}"


def log_in(page, setup: Setup, user: str, path: str) -> None:
    page.goto(setup.url(f"/login?next={path.replace('/', '%2F')}#token={setup.tokens[user]}"))
    page.wait_for_url(setup.url(path))


def test_an_artifact_downloads_from_its_link(setup, open_page, tmp_path):
    client = setup.server.client()
    run = client.create_run(project="web-art", name="with files")
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(70_000))
    client.upload_artifact(run["id"], str(source), "model/weights.bin", type="model")
    page = open_page()
    page.goto(setup.url(f"/runs/{run['id']}"))
    link = page.locator("[data-testid=artifact-row][data-path='model/weights.bin'] [data-testid=artifact-download]")
    with page.expect_download() as download:
        link.click()
    saved = tmp_path / "got.bin"
    download.value.save_as(saved)
    assert saved.read_bytes() == source.read_bytes()
    screenshot(page, "run-artifacts")


def test_the_owner_renames_annotates_tags_archives_and_deletes_a_run(setup, open_page, tmp_path):
    alice = setup.as_user("alice")
    run = alice.create_run(project="web-manage", name="draft")
    source = tmp_path / "preds.csv"
    source.write_bytes(b"id,label\n1,cat\n")
    alice.upload_artifact(run["id"], str(source), "preds.csv")
    page = open_page(remote=True)
    log_in(page, setup, "alice", f"/runs/{run['id']}")

    # a download from a logged-in browser carries the session's key
    with page.expect_download() as download:
        page.locator("[data-testid=artifact-download]").click()
    download.value.save_as(tmp_path / "got.csv")
    assert (tmp_path / "got.csv").read_bytes() == b"id,label\n1,cat\n"

    page.locator("[data-testid=run-rename]").click()
    page.locator("[data-testid=rename-input]").fill("baseline lr 3e-4")
    page.locator("[data-testid=rename-save]").click()
    page.locator("[data-testid=run-name]", has_text="baseline lr 3e-4").wait_for()
    assert alice.get_run(run["id"])["name"] == "baseline lr 3e-4"

    notes = ("## Why\nThe loss **plateaued**; see `lr`.\n\n- one\n- two\n\n"
             "<script>window.pwned = 1</script> [bad](javascript:alert(1)) [ok](https://example.org/x)")
    page.locator("[data-testid=run-edit-notes]").click()
    page.locator("[data-testid=notes-input]").fill(notes)
    page.locator("[data-testid=notes-save]").click()
    view = page.locator("[data-testid=notes-view]")
    view.locator("h4", has_text="Why").wait_for()
    assert view.locator("strong").inner_text() == "plateaued"
    assert view.locator("li").all_inner_texts() == ["one", "two"]
    assert "<script>window.pwned = 1</script>" in view.inner_text()  # shown as text, never run
    assert page.evaluate("window.pwned") is None and view.locator("script").count() == 0
    assert [a.get_attribute("href") for a in view.locator("a").all()] == ["https://example.org/x"]
    assert alice.get_run(run["id"])["notes"] == notes

    page.locator("[data-testid=run-tags]").click()
    page.locator("[data-testid=tag-input]").fill("keep")
    page.locator("[data-testid=tag-add]").click()
    page.locator("[data-testid=tag-remove][data-tag=keep]").wait_for()
    assert alice.get_run(run["id"])["tags"] == ["keep"]

    page.reload()
    page.locator("[data-testid=run-archive]").click()
    page.locator("[data-testid=run-archived]").wait_for()
    assert alice.get_run(run["id"])["archived"] is True
    screenshot(page, "run-manage")
    page.goto(setup.url("/runs?project=web-manage"))  # archived runs leave the list, until asked for
    page.locator("[data-testid=empty-state]").wait_for()
    page.locator("[data-testid=show-archived]").check()
    page.locator(f"[data-testid=run-row][data-run-id='{run['id']}']").wait_for()
    page.goto(setup.url(f"/runs/{run['id']}"))

    page.locator("[data-testid=run-delete]").click()
    page.locator("[data-testid=confirm-no]").click()
    assert alice.get_run(run["id"])["id"] == run["id"]  # kept
    page.locator("[data-testid=run-delete]").click()
    page.locator("[data-testid=confirm-yes]").click()
    page.wait_for_url(re.compile(r"/runs\?project=web-manage$"))
    assert alice.runs(project="web-manage") == [] and alice.runs(project="web-manage", archived=True) == []


def test_another_user_gets_no_controls_and_no_artifacts(setup, open_page, tmp_path):
    alice = setup.as_user("alice")
    run = alice.create_run(project="web-other", name="alices run")
    alice.change_run(run["id"], notes="only *hers*")
    page = open_page(remote=True)
    log_in(page, setup, "bob", f"/runs/{run['id']}")
    page.locator("[data-testid=notes-view] em", has_text="hers").wait_for()  # runs are everybody's to see
    assert page.locator("[data-testid=run-manage]").is_hidden()
    page.locator("[data-testid=error-state]", has_text="artifacts").wait_for()


def test_the_run_page_shows_images_and_histograms_by_step(setup, open_page, tmp_path):
    import numpy as np

    from corral.sdk.media import Histogram, Image

    client = setup.server.client()
    run = client.create_run(project="web-media", name="with media")
    for step in (0, 5, 9):
        for name, item in ((f"media/samples/{step:08d}.png", Image(np.full((16, 24, 3), step * 25, np.uint8),
                                                                     caption=f"epoch {step}")),
                           (f"media/weights/{step:08d}.hist.json", Histogram(np.arange(step + 1), bins=4))):
            path = tmp_path / "m"
            path.write_bytes(item.encode())
            client.upload_artifact(run["id"], str(path), name, type=item.type, step=step, caption=item.caption)
    page = open_page()
    page.goto(setup.url(f"/runs/{run['id']}"))
    images = page.locator("[data-testid=media-card][data-key=samples]")
    images.locator("[data-testid=media-image][data-step='9']").wait_for()  # the last step first
    assert images.locator("[data-testid=media-caption]").inner_text() == "epoch 9"
    images.locator("[data-testid=media-slider]").fill("0")
    images.locator("[data-testid=media-image][data-step='0']").wait_for()
    assert images.locator("[data-testid=media-step]").inner_text() == "step 0 (1 of 3)"
    assert images.locator("[data-testid=media-caption]").inner_text() == "epoch 0"
    assert page.evaluate("document.querySelector('[data-testid=media-image]').naturalWidth") == 24
    hist = page.locator("[data-testid=media-card][data-key=weights]")
    hist.locator("[data-testid=media-histogram][data-step='9']").wait_for()
    assert sum(int(c) for c in hist.locator("rect").evaluate_all("bars => bars.map(b => b.dataset.count)")) == 10
    hist.locator("[data-testid=media-slider]").fill("1")
    hist.locator("[data-testid=media-histogram][data-step='5']").wait_for()
    assert page.locator("[data-testid=artifact-row]").count() == 0  # media are not listed twice
    screenshot(page, "run-media")
