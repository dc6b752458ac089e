"""A real headless Chromium (Debian's `chromium` + `chromium-driver`) driven by Selenium.

Selenium is synchronous and the inbox runs on the test's event loop, so every browser step
runs in a worker thread (`Browser.do`) while the loop keeps serving. Install the browser with
`make browser` (scripts/install_browser.sh); a missing browser fails the test, in CI and
everywhere else: a browser test never passes by skipping itself.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
    "--lang=en-US",
)
T = TypeVar("T")

# What chromedriver answers when a step reads a document the browser is navigating away from
# (a form post, a redirect): the element or its JavaScript context is gone, and the next poll
# sees the new page. Only these are "not yet"; any other driver error fails the wait.
NAVIGATING = (
    "unhandled inspector error",
    "cannot find context with specified id",
    "execution context was destroyed",
    "no node with given id",
    "does not belong to the document",
)


def navigating(error: WebDriverException) -> bool:
    if isinstance(error, StaleElementReferenceException):
        return True
    return any(phrase in str(error.msg or "").lower() for phrase in NAVIGATING)


def until_settled(condition: Callable[[WebDriver], Any]) -> Callable[[WebDriver], Any]:
    """`condition`, with a navigation in progress counted as "not yet" (False)."""

    def poll(driver: WebDriver) -> Any:
        try:
            return condition(driver)
        except WebDriverException as error:
            if navigating(error):
                return False
            raise

    return poll


def chromium(binary: Path = CHROMIUM, driver_binary: Path = DRIVER) -> Iterator[WebDriver]:
    if not (binary.exists() and driver_binary.exists()):
        pytest.fail(
            f"the inbox's browser tests need Debian chromium + chromium-driver ({binary}, "
            f"{driver_binary}): install them with `make browser` (runs "
            "scripts/install_browser.sh, as root), then run the tests again",
            pytrace=False,
        )
    os.environ.setdefault("SE_AVOID_STATS", "true")  # no usage statistics from Selenium
    options = webdriver.ChromeOptions()
    options.binary_location = str(binary)
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(driver_binary)), options=options)
    driver.set_page_load_timeout(15)
    try:
        yield driver
    finally:
        driver.quit()


class Browser:
    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base = base_url

    async def do(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def open(self, path: str) -> None:
        await self.do(self.driver.get, self.base + path)

    async def wait_for(self, css: str, within_s: float = 10) -> WebElement:
        wait = WebDriverWait(self.driver, within_s)
        found: WebElement = await self.do(
            wait.until, until_settled(ec.presence_of_element_located((By.CSS_SELECTOR, css)))
        )
        return found

    async def wait_text(self, css: str, text: str, within_s: float = 10) -> None:
        wait = WebDriverWait(self.driver, within_s)
        await self.do(
            wait.until,
            until_settled(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)),
        )

    async def find(self, css: str, within_s: float = 10) -> WebElement:
        """The element once the page has settled (a missing element fails after `within_s`)."""

        def look(driver: WebDriver) -> WebElement:
            return driver.find_element(By.CSS_SELECTOR, css)

        found: WebElement = await self.do(
            WebDriverWait(self.driver, within_s).until, until_settled(look)
        )
        return found

    async def text(self, css: str) -> str:
        def read(driver: WebDriver) -> list[str]:
            return [str(driver.find_element(By.CSS_SELECTOR, css).text)]  # "" is an answer too

        found: list[str] = await self.do(WebDriverWait(self.driver, 10).until, until_settled(read))
        return found[0]

    async def click(self, css: str) -> None:
        # Found with retries, clicked once: a click is never repeated (it may post a decision).
        element = await self.find(css)
        await self.do(element.click)

    async def type(self, css: str, text: str) -> None:
        element = await self.find(css)
        await self.do(element.clear)
        await self.do(element.send_keys, text)

    async def script(self, source: str, *args: Any) -> Any:
        return await self.do(self.driver.execute_script, source, *args)

    async def sign_in(self, token: str, expect_id: str) -> None:
        await self.open("/healthz")  # cookies are deleted per site: be on the inbox's
        await self.do(self.driver.delete_all_cookies)
        await self.open("/login")
        # A 600-character token typed key by key is slow; set it as the user's paste would.
        await self.script("document.getElementById('token').value = arguments[0];", token)
        await self.click("#sign-in")
        await self.wait_text("#me", expect_id)


class ForeignPage:
    """An HTML page served from another origin (a loopback port of its own: same site, other
    origin), for attacks a browser would carry cookies on. Use as a context manager."""

    def __init__(self, html: str) -> None:
        body = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ForeignPage:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
