"""The chat page at GET / in a real headless browser: Debian's chromium and chromedriver, driven by
selenium. The page loads, a message sent streams its reply in several updates, a second turn
works, and with --api-key the page shows the 401 until the key is entered."""
import json
import os
import shutil
import urllib.request

import pytest

from conftest import wait_until

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("selenium is not installed (pip install selenium)", allow_module_level=True)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REPLY_SECONDS = 90


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        message = "missing " + ", ".join(missing) + " (apt-get install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,800"):
        options.add_argument(arg)
    # An explicit driver path: selenium-manager must not try to download one.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


# Counts the changes of the newest assistant message's text, so that a test can tell a streamed
# reply (many updates) from one written at once.
WATCH_REPLIES = """
window.replyUpdates = 0;
new MutationObserver(() => { window.replyUpdates += 1; })
    .observe(document.getElementById('messages'),
             {childList: true, subtree: true, characterData: true});
"""


def send(driver, text):
    box = driver.find_element(By.ID, "input")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "send").click()


def wait_idle(driver):
    WebDriverWait(driver, REPLY_SECONDS).until(
        lambda d: d.find_element(By.ID, "send").is_enabled())


def assistant_texts(driver):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".message.assistant")]


def test_page_streams_a_reply_and_keeps_the_conversation(server, browser):
    browser.get(server.base_url + "/")
    assert browser.title == "pi-server chat"
    WebDriverWait(browser, 10).until(
        lambda d: d.find_element(By.ID, "model").text.startswith("model: "))
    browser.execute_script(WATCH_REPLIES)
    browser.find_element(By.ID, "max-tokens").clear()
    browser.find_element(By.ID, "max-tokens").send_keys("48")

    send(browser, "Who made the heaven and the earth?")
    WebDriverWait(browser, REPLY_SECONDS).until(
        lambda d: "tokens/s" in d.find_element(By.ID, "stats").text)
    first = assistant_texts(browser)
    assert len(first) == 1 and first[0].strip()
    assert browser.execute_script("return window.replyUpdates") > 3, "the reply was not streamed"
    stats = browser.find_element(By.ID, "stats").text
    assert "FFN neurons active" in stats and "reply tokens" in stats

    send(browser, "And what did he say?")
    WebDriverWait(browser, REPLY_SECONDS).until(lambda d: len(assistant_texts(d)) == 2)
    wait_idle(browser)
    second = assistant_texts(browser)
    assert second[0] == first[0] and second[1].strip()
    # The second turn sent the whole conversation: the first turn's tokens came from the cache.
    assert "cached" in browser.find_element(By.ID, "stats").text
    assert not browser.find_elements(By.CSS_SELECTOR, ".message.error")


def test_page_shows_the_key_error_until_the_key_is_given(api_key_server, browser):
    browser.get(api_key_server.base_url + "/")
    browser.execute_script("localStorage.removeItem('pi-server-api-key')")
    browser.refresh()
    send(browser, "Hello")
    WebDriverWait(browser, REPLY_SECONDS).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".message.error"))
    error = browser.find_element(By.CSS_SELECTOR, ".message.error").text
    assert "key" in error.lower()
    assert not [t for t in assistant_texts(browser) if t.strip()]

    key = browser.find_element(By.ID, "api-key")
    key.send_keys(api_key_server.api_key)
    browser.find_element(By.ID, "system").click()  # leaves the field: its change event saves it
    send(browser, "Hello")
    WebDriverWait(browser, REPLY_SECONDS).until(
        lambda d: [t for t in assistant_texts(d) if t.strip()])
    wait_idle(browser)
    assert browser.execute_script("return localStorage.getItem('pi-server-api-key')") == \
        api_key_server.api_key


def test_stop_ends_the_reply_and_frees_the_slot(start_server, browser):
    # The fixture model writes thousands of tokens a second: the reply must be long enough to
    # be still running when Stop is clicked.
    s = start_server(slots=1, ctx=32768)
    browser.get(s.base_url + "/")
    browser.find_element(By.ID, "max-tokens").clear()
    browser.find_element(By.ID, "max-tokens").send_keys("32000")
    send(browser, "Tell me everything.")
    WebDriverWait(browser, REPLY_SECONDS).until(lambda d: [t for t in assistant_texts(d) if t])
    browser.find_element(By.ID, "stop").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "stats").text == "stopped")
    assert assistant_texts(browser)[0].strip()  # what came before Stop stays
    health = lambda: json.loads(urllib.request.urlopen(s.base_url + "/health", timeout=10).read())
    wait_until(lambda: health()["slots_processing"] == 0, 30, "the slot to be freed")
