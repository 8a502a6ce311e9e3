"""The attention explorer in a real browser (slow layer): Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver, against `nmt serve` on 127.0.0.1. It types a sentence, waits for the
translation, and checks the heatmap's cells against the attention /v1/translate returns."""

import json
import shutil
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import start

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900"]  # fmt: skip
SENTENCE = "nopaju kaju zufete giholo fegibe"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')"
    )
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (apt-get install chromium "
            "chromium-driver; .ci/run does where apt-get runs as root)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='nmt-chromium-')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def api_attention(url: str, model: str) -> dict:
    body = json.dumps({"q": SENTENCE, "model": model, "nbest": 5, "attention": True}).encode()
    request = urllib.request.Request(f"{url}/v1/translate", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["translations"][0]["lines"][0]


def shown_cells(driver: object) -> dict[tuple[int, int], float]:
    script = "return [...document.querySelectorAll('.panel rect.cell')].map(r => [+r.dataset.row, +r.dataset.col, r.dataset.w])"  # noqa: E501
    cells = driver.execute_script(script)  # type: ignore[attr-defined]
    return {(row, col): float(w) for row, col, w in cells}


def test_the_heatmap_shows_the_attention_the_api_returns(
    browser: object, server: str, trained_run: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    driver.get(server)  # type: ignore[attr-defined]
    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel select.model option"))
    driver.find_element(By.ID, "text").send_keys(SENTENCE)  # type: ignore[attr-defined]
    driver.find_element(By.ID, "translate").click()  # type: ignore[attr-defined]
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel rect.cell"))

    line = api_attention(server, trained_run.name)
    best = line["hypotheses"][0]
    nbest = driver.find_elements(By.CSS_SELECTOR, ".panel .nbest li .text")  # type: ignore[attr-defined]
    assert [item.text for item in nbest] == [h["text"] for h in line["hypotheses"]]
    labels = driver.find_elements(By.CSS_SELECTOR, ".panel .col-label")  # type: ignore[attr-defined]
    assert [label.text for label in labels] == [p.replace("▁", "·", 1) for p in line["source_pieces"]]

    # the default view: the last layer, the mean of its heads
    last = best["attention"][-1]
    mean = {
        (t, s): sum(head[t][s] for head in last) / len(last)
        for t in range(len(last[0]))
        for s in range(len(last[0][0]))
    }
    shown = shown_cells(driver)
    assert shown.keys() == mean.keys()
    assert all(abs(shown[cell] - mean[cell]) < 2e-5 for cell in mean)

    # one head of the first layer: the cells are exactly the API's weights
    Select(driver.find_element(By.CSS_SELECTOR, ".panel select.layer")).select_by_value("0")  # type: ignore[attr-defined]
    Select(driver.find_element(By.CSS_SELECTOR, ".panel select.head")).select_by_value("1")  # type: ignore[attr-defined]
    head = best["attention"][0][1]
    assert shown_cells(driver) == {(t, s): w for t, row in enumerate(head) for s, w in enumerate(row)}

    # hovering a target subword lights the source subwords it attends to (weight >= 0.1)
    row = driver.find_elements(By.CSS_SELECTOR, ".panel .row-label")[0]  # type: ignore[attr-defined]
    ActionChains(driver).move_to_element(row).perform()
    lit = driver.execute_script(  # type: ignore[attr-defined]
        "return [...document.querySelectorAll('.panel .col-label')].map(l => l.classList.contains('lit'))"
    )
    assert lit == [w >= 0.1 for w in head[0]]


def test_the_explorer_opened_with_a_base64_key_translates(
    browser: object, trained_run: Path, tmp_path: Path
) -> None:
    """A key as `openssl rand -base64 16` prints it (with / + =): the page opened as /?api_key=KEY keeps it in
    its cookie, and its own requests (the models, the translation) carry it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    key = "q0Vd5m/7Xo+3zJwLb9k2hA=="
    (tmp_path / "keys").write_text(f"{key}\n")
    served = start(trained_run, "--api-key-file", str(tmp_path / "keys"))
    try:
        driver = browser
        driver.get(f"{served.url}/?api_key={urllib.parse.quote(key, safe='')}")  # type: ignore[attr-defined]
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel select.model option"))
        driver.find_element(By.ID, "text").send_keys(SENTENCE)  # type: ignore[attr-defined]
        driver.find_element(By.ID, "translate").click()  # type: ignore[attr-defined]
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel rect.cell"))
        assert driver.find_elements(By.CSS_SELECTOR, ".panel .nbest li .text")  # type: ignore[attr-defined]
    finally:
        assert served.stop() == 0
