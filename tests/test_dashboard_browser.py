"""The dashboard in a real browser: the distribution's headless Chromium
driven by selenium through /usr/bin/chromedriver.  The page shows the numbers
the server has (clients, keys, a list's depth, a stream group's lag and
pending, an RQ queue under its own name, a list's enqueued and dequeued
counters) and updates itself after an LPUSH and an RPOP without a reload; a
screenshot of each state is saved under the test's tmp dir and, when
HOTKV_TEST_ARTIFACTS names a directory, copied there.  Skips,
naming what is missing, without chromium, chromedriver or selenium.  ~5 s.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest
import valkey

from support import free_port

pytest.importorskip("h11", reason="h11 (pip install 'hotkv[dashboard]') is not installed")
webdriver = pytest.importorskip("selenium.webdriver",
                                reason="selenium is not installed (pip install selenium)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--window-size=1400,1800")


@pytest.fixture
def browser(tmp_path):
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed "
                    "(apt-get install -y chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument("--user-data-dir=%s" % (tmp_path / "chromium-profile"))
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()


def _until(fn, what, timeout=15.0):
    """Poll fn() (bounded in time and count) until it is true; its value."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.1) + 1):
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise AssertionError("the page never showed %s" % what)


def _shot(drv, tmp_path, name):
    path = tmp_path / name
    drv.save_screenshot(str(path))
    assert path.stat().st_size > 10_000   # a real rendering, not an empty image
    dest = os.environ.get("HOTKV_TEST_ARTIFACTS")
    if dest:
        os.makedirs(dest, exist_ok=True)
        shutil.copy(path, os.path.join(dest, name))


def _ok(x):
    return x


def test_the_page_shows_the_servers_numbers_and_updates_live(browser, hotkv_server_factory,
                                                             tmp_path):
    import redis
    import rq
    port = free_port()
    server = hotkv_server_factory(http_port=port)
    r = valkey.Valkey(host=server.host, port=server.port)
    r.rpush("jobs", *("job%d" % i for i in range(7)))
    for i in range(4):
        r.xadd("events", {"n": i})
    r.xgroup_create("events", "workers", "0")
    r.xreadgroup("workers", "w1", {"events": ">"}, count=1)
    conn = redis.Redis(host=server.host, port=server.port)
    q = rq.Queue("emails", connection=conn)
    for i in range(2):
        q.enqueue(_ok, i)

    browser.get("http://127.0.0.1:%d/" % port)
    _until(lambda: browser.execute_script("return document.body.dataset.updated"),
           "a first update")

    def text(css):
        # Read in one script call: the page replaces its tables every second,
        # so a WebElement found first may be gone when read.
        return browser.execute_script(
            "const e = document.querySelector(arguments[0]);"
            "return e ? e.textContent.trim() : null;", css)

    _until(lambda: text('tr[data-key="jobs"] td.depth') == "7", "the list's depth 7")
    assert text('div[data-stream="events"] tr[data-group="workers"] td.lag') == "3"
    assert text('div[data-stream="events"] tr[data-group="workers"] td.pending') == "1"
    assert text('tr[data-library="rq"][data-queue="emails"] td.queued') == "2"
    keys = r.dbsize()
    _until(lambda: text("#keys-total") == str(keys), "the key count %d" % keys)
    clients = r.info("clients")["connected_clients"]
    _until(lambda: text("#clients") == str(clients), "%d clients" % clients)
    assert "live" in text("#status")
    _shot(browser, tmp_path, "dashboard-before.png")

    first = browser.execute_script("return document.body.dataset.updated")
    r.lpush("jobs", "one more", "and another")
    _until(lambda: text('tr[data-key="jobs"] td.depth') == "9", "the depth after LPUSH")
    assert browser.execute_script("return document.body.dataset.updated") != first
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") \
        == 1   # updated in place: no reload
    # The depth plot has a series for the list.
    assert "0:jobs" in text("#depth-legend")
    # Its counters: 7 RPUSHed + 2 LPUSHed in; then a consumer takes 3.
    _until(lambda: text('tr[data-key="jobs"] td.enqueued') == "9", "9 enqueued")
    assert text('tr[data-key="jobs"] td.dequeued') == "0"
    r.rpop("jobs", 3)
    _until(lambda: text('tr[data-key="jobs"] td.dequeued') == "3", "3 dequeued")
    assert text('tr[data-key="jobs"] td.depth') == "6"
    # The enqueue/dequeue plot draws the list (traffic in the last minute).
    _until(lambda: "0:jobs" in (text("#flow-legend") or ""), "jobs in the flow plot")
    _shot(browser, tmp_path, "dashboard-after-lpush.png")
    conn.close()
