"""The dashboard under the identity model, in a real browser against a live shared (root) server.

A browser on the server's machine is who the kernel says (root here, an admin). A REMOTE browser
is played by sending `X-Forwarded-For` on every request, as a reverse proxy would: the server
then ignores the local connection and wants a login. Alice and bob are real accounts
(tests/users.py); their jobs run as them, submitted with their own API tokens.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shutil
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from corral.client import Client
from tests.conftest import Server, _kill_leftover_supervisors
from tests.helpers import wait_for
from tests.web.conftest import screenshot

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")

REMOTE = {"X-Forwarded-For": "203.0.113.9"}  # what a proxy in front of corral adds for another machine's browser
SLEEP = ["sleep", "60"]
# The only console errors a page may log here: Chromium reports each refused fetch (the first
# whoami of a browser that is not logged in, the logs another user's job keeps) as an error.
REFUSED = re.compile(r"Failed to load resource: the server responded with a status of (401 \(Unauthorized\)|403 \(Forbidden\))")


@dataclass
class Shared:
    server: Server
    alice: str
    bob: str
    tokens: dict[str, str]  # alice, alice-read (the browsers'); alice-api, bob (submitting)
    jobs: dict[str, int]  # bob's, alice's

    def url(self, path: str) -> str:
        return self.server.url + path

    def root(self) -> Client:
        return Client(home=self.server.home)


@pytest.fixture(scope="module")
def shared(os_users) -> Iterator[Shared]:
    """A root server; a token each for alice (submit and read) and bob; a job of each, running as them."""
    alice, bob = os_users
    base = tempfile.mkdtemp(prefix="corral-web-", dir="/tmp")
    os.chmod(base, 0o711)  # the jobs' owners pass through to the server's home
    home = os.path.join(base, "home")
    server = Server(home=home, extra=["--cpus", "16", "--mem", "64G"]).start()
    try:
        with Client(home=home) as root:
            tokens = {
                "alice": root.create_token(user=alice, scope="submit", expires="1h")["token"],
                "alice-read": root.create_token(user=alice, scope="read", expires="1h")["token"],
                "alice-api": root.create_token(user=alice, scope="submit", expires="1h")["token"],
                "bob": root.create_token(user=bob, scope="submit", expires="1h")["token"],
            }
        with Client(server.url, token=tokens["bob"]) as as_bob:
            bobs = as_bob.submit(SLEEP, submit_dir="/tmp", name="bobs-training")
        with Client(server.url, token=tokens["alice-api"]) as as_alice:
            alices = as_alice.submit(SLEEP, submit_dir="/tmp", name="alices-eval")
        assert (bobs["user"], alices["user"]) == (bob, alice)
        yield Shared(server, alice, bob, tokens, {"bob": bobs["id"], "alice": alices["id"]})
    finally:
        server.stop()
        _kill_leftover_supervisors(home)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def open_page(browser) -> Iterator[Callable[..., object]]:
    """open_page(remote=True): a fresh browser (its own cookies) and page; the test fails on any page
    error, and on any console error other than a refused (401/403) request."""
    contexts = []
    errors: list[str] = []

    def open_(remote: bool = True):
        context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB",
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


def log_in(page, shared: Shared, token: str, next_path: str = "/queue") -> None:
    page.goto(shared.url(next_path))
    page.wait_for_url(re.compile(r"/login\?next=" + re.escape(urllib.parse.quote(next_path, safe="")) + "$"))
    page.locator("[data-testid=login-token]").fill(token)
    page.locator("[data-testid=login-submit]").click()
    page.wait_for_url(shared.url(next_path))


def whoami(page) -> dict[str, str]:
    me = page.locator("[data-testid=whoami]")
    me.wait_for()
    return {"user": me.get_attribute("data-user"), "scope": me.get_attribute("data-scope"),
            "via": me.get_attribute("data-via")}


def test_a_remote_browser_lands_on_the_login_page_and_logs_in_with_a_token(shared, open_page):
    page = open_page()
    page.goto(shared.url("/queue"))
    page.wait_for_url(re.compile(r"/login\?next=%2Fqueue$"))  # the page it wanted, for afterwards
    page.locator("[data-testid=login-form]").wait_for()
    assert "corral token create --scope read" in page.locator("[data-testid=login-form]").inner_text()
    assert not page.locator("[data-testid=whoami]").is_visible()
    assert page.locator("[data-testid=live-status]").is_hidden()  # no stream is open for nobody
    screenshot(page, "login")

    page.locator("[data-testid=login-token]").fill("corral_not-a-real-token")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/session")) as answer:
        page.locator("[data-testid=login-submit]").click()
    assert answer.value.status == 401
    error = page.locator("[data-testid=login-error]")
    error.wait_for()
    assert answer.value.json()["error"]["message"] in error.inner_text()  # the server's words
    assert page.url.endswith("/login?next=%2Fqueue")

    page.locator("[data-testid=login-token]").fill(shared.tokens["alice"])
    page.locator("[data-testid=login-submit]").click()
    page.wait_for_url(shared.url("/queue"))
    assert whoami(page) == {"user": shared.alice, "scope": "submit", "via": "session"}
    assert page.locator("[data-testid=logout]").is_visible()
    for job in shared.jobs.values():  # everyone sees the whole queue
        page.locator(f"[data-testid=queue-row][data-job-id='{job}']").wait_for()
    page.wait_for_function("document.querySelector('[data-testid=live-status]').textContent === 'live'")
    # the cookie is the server's: the page's scripts never see the token
    assert shared.tokens["alice"] not in page.evaluate("document.cookie + document.documentElement.outerHTML")


def test_someone_elses_job_offers_no_actions_and_says_who_may_read_its_logs(shared, open_page):
    page = open_page()
    log_in(page, shared, shared.tokens["alice"], f"/jobs/{shared.jobs['bob']}")
    page.locator("[data-testid=job-state]").wait_for()
    refused = page.locator("[data-testid=logs-forbidden]")
    refused.wait_for()
    said = refused.inner_text()
    assert f"Only {shared.bob} or an admin can read this job's logs" in said
    assert f"you are {shared.alice}" in said  # then the server's own words, as words
    assert page.locator("[data-testid=log-stdout]").count() == 0
    page.locator("[data-testid=diagnosis][data-forbidden=true]").wait_for()
    assert f"Only {shared.bob} or an admin" in page.locator("[data-testid=diagnosis]").inner_text()
    note = page.locator("[data-testid=job-actions-note]")
    assert f"Only {shared.bob} or an admin can cancel" in note.inner_text()
    for action in ("cancel", "hold", "release"):
        assert page.locator(f"[data-testid=job-{action}]").count() == 0
    body = page.locator("body").inner_text()
    assert "[object" not in body and '{"error"' not in body  # never a raw error object
    screenshot(page, "job-of-another-user")
    assert shared.root().get(shared.jobs["bob"])["state"] in ("PENDING", "RUNNING")


def test_her_own_job_she_can_cancel(shared, open_page):
    with Client(shared.server.url, token=shared.tokens["alice-api"]) as as_alice:
        job = as_alice.submit(SLEEP, submit_dir="/tmp", name="to-cancel")["id"]
    page = open_page()
    log_in(page, shared, shared.tokens["alice"], f"/jobs/{job}")
    page.locator("[data-testid=job-cancel]").click()
    page.locator("[data-testid=confirm-yes]").click()
    wait_for(lambda: shared.root().get(job)["state"] == "CANCELLED", timeout=20)
    page.wait_for_function("document.querySelector('[data-testid=job-state]').dataset.state === 'CANCELLED'",
                           timeout=30_000)
    assert page.locator("[data-testid=action-error]").is_hidden()
    assert page.locator("[data-testid=job-actions-note]").count() == 0


def test_the_owner_and_an_admin_read_a_jobs_log_live(shared, open_page):
    with Client(shared.server.url, token=shared.tokens["alice-api"]) as as_alice:
        job = as_alice.submit(["sh", "-c", "echo hello from alice; sleep 2; echo still here; sleep 60"],
                              submit_dir="/tmp", name="chatty")["id"]
    owner = open_page()
    log_in(owner, shared, shared.tokens["alice"], f"/jobs/{job}")
    admin = open_page(remote=False)
    admin.goto(shared.url(f"/jobs/{job}"))
    try:
        for page in (owner, admin):
            log = page.locator("[data-testid=log-stdout]")
            wait_for(lambda: "hello from alice" in log.inner_text(timeout=5_000), timeout=20)
            wait_for(lambda: "still here" in log.inner_text(timeout=5_000), timeout=20)  # live, without a reload
            assert page.locator("[data-testid=logs-forbidden]").count() == 0
    finally:
        shared.root().cancel(job)


def test_logging_out_returns_to_the_login_page_and_forgets_the_session(shared, open_page):
    page = open_page()
    log_in(page, shared, shared.tokens["alice"], "/queue")
    [cookie] = page.context.cookies()
    kept = {"Cookie": f"{cookie['name']}={cookie['value']}", "X-Corral-Session": page.evaluate(
        "localStorage.getItem('corral.session-key')"), **REMOTE}
    assert with_headers_only(shared.server.url, "GET", "/api/v1/whoami", kept) == 200
    page.locator("[data-testid=logout]").click()
    page.wait_for_url(shared.url("/login"))
    page.locator("[data-testid=login-form]").wait_for()
    assert not page.locator("[data-testid=whoami]").is_visible()
    page.goto(shared.url("/runs"))  # the cookie went with it: the server does not know us any more
    page.wait_for_url(re.compile(r"/login\?next=%2Fruns$"))
    assert page.context.cookies() == [] and page.evaluate("localStorage.length") == 0
    # and the session itself is over on the server: a copy of both halves taken before is worthless
    assert with_headers_only(shared.server.url, "GET", "/api/v1/whoami", kept) == 401


def test_a_token_in_the_fragment_logs_in_with_one_click_and_leaves_the_address_bar(shared, open_page):
    page = open_page()
    mine = shared.jobs["alice"]
    page.goto(shared.url(f"/login?next=%2Fjobs%2F{mine}#token={shared.tokens['alice-read']}"))
    page.wait_for_url(shared.url(f"/jobs/{mine}"))
    assert whoami(page) == {"user": shared.alice, "scope": "read", "via": "session"}
    assert shared.tokens["alice-read"] not in page.url
    assert page.evaluate("location.hash") == ""
    page.go_back()  # the link itself is not in the history either
    assert shared.tokens["alice-read"] not in page.url
    page.goto(shared.url(f"/jobs/{mine}"))
    # a read-only login sees no actions, even on her own job
    note = page.locator("[data-testid=job-actions-note]")
    note.wait_for()
    assert "Read-only" in note.inner_text()
    assert page.locator("[data-testid=job-cancel]").count() == 0
    page.locator("[data-testid=logs-forbidden]").wait_for()  # the server keeps logs from read-only tokens
    assert "submit-scope token" in page.locator("[data-testid=logs-forbidden]").inner_text()


def test_a_bad_token_in_the_fragment_says_why_and_still_leaves_the_address_bar(shared, open_page):
    page = open_page()
    with page.expect_response(lambda r: r.url.endswith("/api/v1/session")) as answer:
        page.goto(shared.url("/login#token=corral_not-a-real-token"))
    assert answer.value.status == 401
    error = page.locator("[data-testid=login-error]")
    error.wait_for()
    assert answer.value.json()["error"]["message"] in error.inner_text()
    assert page.url == shared.url("/login")


def test_a_browser_on_the_servers_machine_needs_no_login(shared, open_page):
    page = open_page(remote=False)
    page.goto(shared.url(f"/jobs/{shared.jobs['bob']}"))
    assert whoami(page) == {"user": "root", "scope": "admin", "via": "local"}
    assert page.url == shared.url(f"/jobs/{shared.jobs['bob']}")
    assert not page.locator("[data-testid=logout]").is_visible()  # nothing to log out of
    page.locator("[data-testid=job-cancel]").wait_for()  # an admin may act on anyone's job
    assert page.locator("[data-testid=job-actions-note]").count() == 0


def test_a_local_browser_logged_in_with_a_token_is_its_user_until_it_logs_out(shared, open_page):
    page = open_page(remote=False)
    page.goto(shared.url(f"/login?next=%2Fjobs%2F{shared.jobs['bob']}"))
    assert "You are root (admin) already" in page.locator("[data-testid=login-current]").inner_text()
    page.locator("[data-testid=login-token]").fill(shared.tokens["alice"])
    page.locator("[data-testid=login-submit]").click()
    page.wait_for_url(shared.url(f"/jobs/{shared.jobs['bob']}"))
    assert whoami(page)["user"] == shared.alice  # the token speaks, not the machine's user
    page.locator("[data-testid=job-actions-note]").wait_for()
    page.locator("[data-testid=logout]").click()
    # the kernel still knows this browser: no login page, and root's buttons are back
    page.wait_for_function("document.querySelector('[data-testid=whoami]').dataset.user === 'root'")
    page.locator("[data-testid=job-cancel]").wait_for()
    assert page.url == shared.url(f"/jobs/{shared.jobs['bob']}")


def test_a_session_whose_token_is_revoked_goes_back_to_the_login_page_saying_so(shared, open_page):
    with shared.root() as root:
        made = root.create_token(user=shared.alice, scope="read", expires="1h", name="short-lived")
    page = open_page()
    log_in(page, shared, made["token"], "/queue")
    assert whoami(page)["user"] == shared.alice
    with shared.root() as root:
        root.revoke_token(made["id"])
    page.locator("[data-testid=nav-runs]").click()  # the next request of any page answers 401
    page.wait_for_url(re.compile(r"/login\?next=%2Fruns$"))
    assert "session has ended" in page.locator("[data-testid=login-ended]").inner_text()
    assert not page.locator("[data-testid=whoami]").is_visible()


class TensorBoard:
    """Another user's web server on another port of the same host (A's "TensorBoard"): it logs the
    Cookie header of every request, as any server on that port could."""

    def __init__(self) -> None:
        self.cookies: list[str | None] = []
        seen = self.cookies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                seen.append(self.headers.get("Cookie"))
                body = b"<!doctype html><title>TensorBoard</title><h1>TensorBoard</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def with_headers_only(url: str, method: str, path: str, headers: dict[str, str], body: object = None) -> int:
    """One request carrying exactly these headers (and a JSON body), as A would replay what A's server logged."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers={**headers, **({"Content-Type": "application/json"} if payload else {})})
    status = conn.getresponse().status
    conn.close()
    return status


def test_a_session_cookie_seen_on_another_port_of_the_host_is_worthless(shared, open_page):
    # The reproduction: B logs in at localhost:PORT, later opens A's TensorBoard on localhost:OTHER,
    # whose server logs B's cookie (a browser sends a host's cookies to all its ports), and A replays it.
    dashboard = "http://localhost:" + str(urllib.parse.urlsplit(shared.server.url).port)
    tensorboard = TensorBoard()
    bobs = shared.jobs["bob"]
    page = open_page()
    try:
        page.goto(f"{dashboard}/login#token={shared.tokens['bob']}")
        page.wait_for_url(f"{dashboard}/")
        assert whoami(page) == {"user": shared.bob, "scope": "submit", "via": "session"}

        page.goto(f"http://localhost:{tensorboard.port}/")
        page.locator("h1").wait_for()
        cookie = tensorboard.cookies[0]  # (the page's; its favicon's may follow)
        assert cookie is not None and "corral_session=" in cookie  # the browser did hand it over
        assert page.evaluate("localStorage.length") == 0  # the session's key stays with the dashboard's origin

        with shared.root() as root:
            before = {j["id"] for j in root.queue()}
        assert with_headers_only(shared.server.url, "GET", f"/api/v1/jobs/{bobs}/logs", {"Cookie": cookie}) == 401
        assert with_headers_only(shared.server.url, "GET", f"/api/v1/jobs/{bobs}/logs",
                                 {"Cookie": cookie, **REMOTE}) == 401
        job = {"command": ["sh", "-c", "echo running as $(id -un)"], "submit_dir": "/tmp", "name": "as-bob"}
        assert with_headers_only(shared.server.url, "POST", "/api/v1/jobs", {"Cookie": cookie}, job) == 401
        with shared.root() as root:
            assert {j["id"] for j in root.queue()} == before  # nothing was submitted as bob

        # meanwhile B's dashboard goes on as before: logged in, listing jobs, and live
        page.goto(f"{dashboard}/queue")
        assert whoami(page) == {"user": shared.bob, "scope": "submit", "via": "session"}
        page.locator(f"[data-testid=queue-row][data-job-id='{bobs}']").wait_for()
        page.wait_for_function("document.querySelector('[data-testid=live-status]').textContent === 'live'")
        with Client(shared.server.url, token=shared.tokens["bob"]) as as_bob:
            new = as_bob.submit(SLEEP, submit_dir="/tmp", name="seen-live")["id"]
        try:
            page.locator(f"[data-testid=queue-row][data-job-id='{new}']").wait_for(timeout=30_000)  # no reload
        finally:
            shared.root().cancel(new)
    finally:
        tensorboard.close()


def test_a_session_that_ends_while_the_page_sits_idle_goes_to_the_login_page_by_itself(shared, open_page):
    with shared.root() as root:
        made = root.create_token(user=shared.alice, scope="read", expires="1h", name="idle")
    page = open_page()
    log_in(page, shared, made["token"], "/alerts")  # a page that refetches only when an alert fires: none will
    page.wait_for_function("document.querySelector('[data-testid=live-status]').textContent === 'live'")
    with shared.root() as root:
        root.revoke_token(made["id"])
    # no click: the live stream ends with the session, and its reconnection is refused
    page.wait_for_url(re.compile(r"/login\?next=%2Falerts$"), timeout=30_000)
    assert "session has ended" in page.locator("[data-testid=login-ended]").inner_text()
