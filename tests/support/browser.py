"""Driving Debian's headless Chromium (Selenium + chromium-driver) through the console: start a
browser, sign in by keyboard, click and wait for the next page, fill a form, and check that a
page's table columns and form labels are readable at a given viewport width.

Selenium is imported inside the functions: collecting a test module that uses these costs nothing
on a machine without it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.procs import wait_for


def chrome(width: int = 1280, height: int = 800) -> Any:
    """A headless Chromium with a ``width`` x ``height`` window; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    assert Path(driver_path).exists(), "chromium-driver is missing: run `make setup`"
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--disable-extensions",
        "--no-first-run",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(30)
    return driver


def browser_wait(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """``wait_for`` as a browser needs it: the driver raises while a page reloads, and a timeout fails."""
    return wait_for(check, timeout, 0.2, what=what, ignore=(Exception,))


def sign_in_by_keyboard(driver: Any, url: str, token: str) -> None:
    """No mouse: the token field has focus on arrival, Enter submits; on the next page the first
    Tab reaches the skip link and Enter on it moves focus to the content."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver.get(f"{url}/ui/login")
    assert driver.switch_to.active_element.get_attribute("id") == "token"
    ActionChains(driver).send_keys(token, Keys.ENTER).perform()
    browser_wait(
        lambda: (
            "/ui/login" not in driver.current_url and driver.execute_script("return document.readyState") == "complete"
        ),
        what="sign-in",
    )
    ActionChains(driver).send_keys(Keys.TAB).perform()
    skip = driver.switch_to.active_element
    assert skip.get_attribute("class") == "skip" and skip.text == "Skip to content"
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    assert driver.switch_to.active_element.get_attribute("id") == "main"


def text(driver: Any, by: str, selector: str) -> str:
    """An element's text; retried when the page's poll replaced it between find and read."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(10):
        try:
            return driver.find_element(by, selector).text  # type: ignore[no-any-return]
        except StaleElementReferenceException:
            time.sleep(0.1)
    raise AssertionError(f"{selector} kept changing")


def click_and_load(driver: Any, by: str, selector: str) -> None:
    """Click a submit button or link and wait until the next page replaced this one."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(by, selector).click()

    def replaced(_driver: Any) -> bool:
        try:
            old.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:  # chromedriver's word for a node of the old document
            if "does not belong to the document" in str(exc):
                return True
            raise

    WebDriverWait(driver, 15).until(replaced)
    WebDriverWait(driver, 15).until(lambda d: d.execute_script("return document.readyState") == "complete")


def fill(driver: Any, values: dict[str, str]) -> None:
    from selenium.webdriver.common.by import By

    for field_id, value in values.items():
        el = driver.find_element(By.ID, field_id)
        el.clear()
        el.send_keys(value)


# --- phone width: every column and filter readable at 390 px, desktop unchanged at 1280 --------

CLIPPED_JS = """
const el = arguments[0], r = el.getBoundingClientRect(), vw = document.documentElement.clientWidth;
if (r.width === 0 || r.height === 0) return 'not shown (zero size)';
if (r.left < -0.5 || r.right > vw + 0.5) return `outside the viewport: x ${r.left}..${r.right} of ${vw}`;
for (let p = el.parentElement; p; p = p.parentElement) {
  if (getComputedStyle(p).overflowX === 'visible') continue;
  const c = p.getBoundingClientRect();
  if (r.left < c.left - 0.5 || r.right > c.right + 0.5)
    return `clipped by ${p.tagName.toLowerCase()}.${p.className}: x ${r.left}..${r.right}, visible ${c.left}..${c.right}`;
}
return '';
"""
OVERFLOW_JS = "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


def at_width(driver: Any, width: int) -> None:
    """The viewport exactly ``width`` CSS pixels wide (a phone is emulated as one: mobile, DPR 1)."""
    height = 844 if width < 500 else 800
    driver.set_window_size(width, height)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
    )


COLUMN_JS = """
const t = document.querySelector('main table');
if (!t) return [];
const i = [...t.querySelectorAll('thead th')].findIndex(th => th.textContent.trim() === arguments[0]);
if (i < 0) return [];
return [...t.querySelectorAll('tbody tr')].map(tr => tr.children[i]).filter(Boolean);
"""


def readable(driver: Any, column: str) -> list[str]:
    """Every cell of the page's first table under ``column`` (found by its header, whether the
    header row is shown or not): shown, inside the viewport, clipped by no scroller."""
    found = driver.execute_script(COLUMN_JS, column)
    assert found, f"no {column!r} column on {driver.current_url}"
    return [
        f"{column!r} cell {i}: {why}" for i, el in enumerate(found) if (why := driver.execute_script(CLIPPED_JS, el))
    ]


def labels_on_inputs(driver: Any, form: str) -> list[str]:
    """Each label sits right above its own input (same left edge, at most 8 px apart)."""
    from selenium.webdriver.common.by import By

    problems = []
    for label in driver.find_elements(By.CSS_SELECTOR, f"{form} label[for]"):
        field = driver.find_element(By.ID, label.get_attribute("for"))
        lr, fr = label.rect, field.rect
        gap = fr["y"] - (lr["y"] + lr["height"])
        if not (-0.5 <= gap <= 8 and abs(lr["x"] - fr["x"]) <= 2):
            problems.append(f"label {label.text!r} at {lr}, its input at {fr}")
    return problems
