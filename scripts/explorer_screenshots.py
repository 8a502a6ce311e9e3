"""Screenshots of the attention explorer of a running `nmt serve`, as the documentation's images are made.

    nmt serve runs/transformer runs/bahdanau runs/luong --port 8000 &
    python scripts/explorer_screenshots.py --url http://127.0.0.1:8000 --width 1400 --height 900 \
        --text "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt." --out docs/images/explorer.png

It opens the page in Debian's headless Chromium (chromium + chromium-driver, driven by selenium: the `dev`
extra) with a viewport of exactly --width × --height CSS pixels, types --text, translates with every panel the
page opens, and saves a PNG: the viewport, or with --full-page the whole page at that width (the page is then
laid out for a window that tall). --scrolled end scrolls each heatmap to its last columns first; --at-heatmap
scrolls the page down to the first heatmap (its colour legend at the top of the window). The PNG is stored
with a 256-colour palette (Pillow, which matplotlib installs) to keep it small.
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
AT_HEATMAP = "document.querySelector('.panel .view').scrollIntoView({block: 'start'})"
TO_THE_END = "for (const frame of document.querySelectorAll('.heatmap-frame')) frame.scrollLeft = 1e6"
DONE = "return [...document.querySelectorAll('.panel .message')].every(m => m.textContent !== 'translating…')"


def open_browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in [*FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='nmt-chromium-')}"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(shutil.which("chromedriver")), options=options)


def viewport(driver: webdriver.Chrome, width: int, height: int) -> None:
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def screenshot(
    url: str, text: str, width: int, height: int, full_page: bool, scrolled: str, at_heatmap: bool
) -> bytes:
    """The page's PNG after translating `text` in every panel."""
    driver = open_browser()
    try:
        viewport(driver, width, height)
        driver.get(url)
        wait = WebDriverWait(driver, 120)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel select.model option"))
        driver.find_element(By.ID, "text").send_keys(text)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.execute_script(DONE))
        if scrolled == "end":
            driver.execute_script(TO_THE_END)
        if at_heatmap:
            driver.execute_script(AT_HEATMAP)
        if full_page:
            viewport(driver, width, max(height, driver.execute_script("return document.body.scrollHeight")))
        driver.execute_script("document.activeElement.blur()")  # no text cursor in the picture
        pointer = {"type": "mouseMoved", "x": 1, "y": 1}  # nor a row lit by the pointer resting on it
        driver.execute_cdp_cmd("Input.dispatchMouseEvent", pointer)
        return driver.get_screenshot_as_png()
    finally:
        driver.quit()


def small_png(png: bytes, path: Path) -> None:
    """Write `png` with a 256-colour palette (the page has few colours: text, the scale, the panels)."""
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="where `nmt serve` listens, e.g. http://127.0.0.1:8000")
    parser.add_argument("--text", required=True, help="the sentence to translate")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--full-page", action="store_true", help="the whole page, not only the viewport")
    parser.add_argument(
        "--scrolled",
        choices=["start", "end"],
        default="start",
        help="each heatmap scrolled to its first or its last columns",
    )
    parser.add_argument("--at-heatmap", action="store_true", help="the page scrolled to the first heatmap")
    args = parser.parse_args()
    shot = (args.width, args.height, args.full_page, args.scrolled, args.at_heatmap)
    png = screenshot(args.url, args.text, *shot)
    small_png(png, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
