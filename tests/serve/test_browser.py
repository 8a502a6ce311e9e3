"""The attention explorer in a real browser (slow layer): Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver, against `nmt serve` on 127.0.0.1. It types a sentence, waits for the
translation, and checks the heatmap's cells against the attention /v1/translate returns and the word links
drawn over it against its alignment; with a 40-subword sentence in a wide and a narrow window, it checks that
every column and row label can be seen, that no two overlap and that a heatmap wider than its panel says it
scrolls."""

import json
import shutil
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nmt.data.tokenizer import Tokenizer
from nmt.data.words import output_words, source_words
from tests.conftest import ROOT, run_cli
from tests.serve.conftest import start

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,900",
]
SENTENCE = "nopaju kaju zufete giholo fegibe"
LONG = 40  # source subwords, '</s>' included


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


def open_page(driver: object, url: str, width: int = 1400, height: int = 900) -> None:
    """Load the explorer in a viewport of exactly `width` × `height` CSS pixels; wait for its panels."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)  # type: ignore[attr-defined]
    driver.get(url)  # type: ignore[attr-defined]
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".panel select.model option"))


def translate(driver: object, text: str) -> None:
    """Type `text`, press Translate, wait for every panel's answer and show in each its best hypothesis that
    is not empty (a barely trained model's best may be: it has no row to draw)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    area = driver.find_element(By.ID, "text")  # type: ignore[attr-defined]
    area.clear()
    area.send_keys(text)
    driver.find_element(By.ID, "translate").click()  # type: ignore[attr-defined]
    answered = "return [...document.querySelectorAll('.panel .nbest')].every(list => list.children.length)"
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(answered))
    for panel in driver.find_elements(By.CSS_SELECTOR, ".panel"):  # type: ignore[attr-defined]
        hypotheses = panel.find_elements(By.CSS_SELECTOR, ".nbest li")
        next(h for h in hypotheses if h.text.split("\n")[0] != "(empty)").click()


def test_the_heatmap_shows_the_attention_the_api_returns(
    browser: object, server: str, trained_run: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    driver = browser
    open_page(driver, server)
    translate(driver, SENTENCE)

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

    # the colours: 0 to the largest weight shown (as plot-attention's default --scale figure), the legend
    # naming that largest weight; 'fixed' scales 0 to 1
    darkest = "return [...document.querySelectorAll('.panel rect.cell')].reduce((a, r) => +r.dataset.w > +a.dataset.w ? r : a).getAttribute('fill')"  # noqa: E501
    largest = max(max(row) for row in head)
    assert driver.execute_script(darkest) == "rgb(20,10,60)"  # type: ignore[attr-defined]
    assert driver.find_element(By.CSS_SELECTOR, ".panel .legend .top").text == f"{largest:.2f}"  # type: ignore[attr-defined]
    Select(driver.find_element(By.CSS_SELECTOR, ".panel select.scale")).select_by_value("fixed")  # type: ignore[attr-defined]
    assert driver.find_element(By.CSS_SELECTOR, ".panel .legend .top").text == "1"  # type: ignore[attr-defined]


# Per word link the explorer drew: its two words and the cells (row, column) whose centres its outline holds.
LINKS = """
const cells = [...document.querySelectorAll('.panel rect.cell')];
const centre = (r) => [+r.getAttribute('x') + +r.getAttribute('width') / 2,
                       +r.getAttribute('y') + +r.getAttribute('height') / 2];
return [...document.querySelectorAll('.panel rect.link')].map((link) => {
  const [x, y, w, h] = ['x', 'y', 'width', 'height'].map((name) => +link.getAttribute(name));
  const held = cells.filter((cell) => {
    const [cx, cy] = centre(cell);
    return cx > x && cx < x + w && cy > y && cy < y + h;
  });
  return [+link.dataset.src, +link.dataset.tgt, held.map((cell) => [+cell.dataset.row, +cell.dataset.col])];
});
"""


def test_the_word_links_are_drawn_over_the_heatmap(browser: object, server: str, trained_run: Path) -> None:
    """Each link /v1/translate returns outlines the cells of its source word's subwords (columns) and its
    output word's subwords (rows), the words counted as the server counts them; unticking hides them."""
    from selenium.webdriver.common.by import By

    driver = browser
    open_page(driver, server)
    sentence = "nopaju kalomisute zufete dosuvi"  # two made-up words of several subwords each
    translate(driver, sentence)
    chosen = "return [...document.querySelectorAll('.panel .nbest li')].findIndex(li => li.classList.contains('chosen'))"  # noqa: E501
    body = {"q": sentence, "model": trained_run.name, "nbest": 5, "attention": True, "alignments": True}
    request = urllib.request.Request(
        f"{server}/v1/translate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        line = json.loads(response.read())["translations"][0]["lines"][0]
    shown = line["hypotheses"][driver.execute_script(chosen)]  # type: ignore[attr-defined]
    tokenizer = Tokenizer(next(trained_run.glob("spm*.model")))
    src_words = source_words(tokenizer, [tokenizer.sp.piece_to_id(p) for p in line["source_pieces"]])
    tgt_words = output_words(tokenizer, [tokenizer.sp.piece_to_id(p) for p in shown["target_pieces"]])
    assert max(src_words.count(w) for w in set(src_words) - {None}) > 1  # a word of several subwords
    drawn = driver.execute_script(LINKS)  # type: ignore[attr-defined]
    assert sorted([i, j] for i, j, _ in drawn) == shown["alignment"] and drawn
    for i, j, held in drawn:
        expected = [
            [t, s] for t, tw in enumerate(tgt_words) for s, sw in enumerate(src_words) if (sw, tw) == (i, j)
        ]
        assert sorted(held) == expected, (i, j)
    driver.find_element(By.CSS_SELECTOR, ".panel input.links").click()  # type: ignore[attr-defined]
    assert driver.execute_script(LINKS) == []  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def german_rnn(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Bahdanau RNN trained for a few steps on the session corpus, its files named as German →
    English: a second model, of a family with one attention layer and head, whose source language is 'de'."""
    data = tmp_path_factory.mktemp("de-en")
    for path in corpus.iterdir():
        name = path.name.replace(".src", ".de").replace(".tgt", ".en")
        (data / name).write_text("".join(path.read_text().splitlines(keepends=True)[:300]))
    run_dir = tmp_path_factory.mktemp("runs") / "rnn-de-en"
    code, _, err = run_cli(
        "train",
        str(ROOT / "configs" / "tiny-rnn-bahdanau.yaml"),
        "--data",
        str(data),
        "--out",
        str(run_dir),
        "--device",
        "cpu",
        "--max-steps",
        "20",
        "--max-time",
        "0",
        "--set",
        "data.src_lang=de",
        "--set",
        "data.tgt_lang=en",
        "--set",
        "tokenizer.vocab_size=200",
        "--set",
        "train.eval_every=20",
        "--set",
        "train.eval_max_sentences=10",
        "--set",
        "train.final_report=false",
    )
    assert code == 0, err
    return run_dir


@pytest.fixture(scope="module")
def two_models(german_rnn: Path, trained_run: Path) -> Iterator[str]:
    """`nmt serve` with the German RNN (listed first: the page opens on its pair) and the Transformer."""
    served = start(german_rnn, str(trained_run))
    yield served.url
    assert served.stop() == 0


def long_sentence(run_dir: Path, corpus: Path) -> str:
    """Words of the corpus, as many as make exactly LONG source subwords ('</s>' included) for `run_dir`."""
    tokenizer = Tokenizer(next(run_dir.glob("spm*.model")))
    words = " ".join((corpus / "test.src").read_text().splitlines()).split()
    sentence: list[str] = []
    for word in words:
        count = len(tokenizer.encode([" ".join([*sentence, word])])[0]) + 1
        if count <= LONG:
            sentence.append(word)
        if count == LONG:
            return " ".join(sentence)
    raise AssertionError(f"no sentence of {LONG} subwords from the corpus's words")


# Per panel, in the coordinates of its heatmap frame's content (x grows with the frame's scroll): the boxes
# of its labels and of the SVG each lies in, the frame's sizes, whether each label is the topmost thing at
# its centre once scrolled into view, and the texts of its axis titles, scroll hint and visible pickers.
GEOMETRY = """
const shown = (node) => node.checkVisibility();
return [...document.querySelectorAll('.panel')].map((panel) => {
  const frame = panel.querySelector('.heatmap-frame');
  const box = (node) => {
    const r = node.getBoundingClientRect(), f = frame.getBoundingClientRect();
    return [r.left - f.left + frame.scrollLeft, r.top - f.top + frame.scrollTop,
            r.right - f.left + frame.scrollLeft, r.bottom - f.top + frame.scrollTop];
  };
  const seen = (label) => {
    label.scrollIntoView({block: 'center', inline: 'center'});
    const r = label.getBoundingClientRect();
    const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
    return top !== null && (top === label || label.contains(top));
  };
  const labels = (selector) => [...panel.querySelectorAll(selector)].map((label) => ({
    text: label.textContent, box: box(label), svg: box(label.closest('svg')), seen: seen(label),
  }));
  const hint = panel.querySelector('.scroll-hint');
  frame.scrollLeft = 0;
  return {
    model: panel.querySelector('select.model').value,
    frame: {client: frame.clientWidth, scroll: frame.scrollWidth, height: frame.scrollHeight},
    frameBox: (({left, right}) => [left, right])(frame.getBoundingClientRect()),
    cols: labels('.col-label'), rows: labels('.row-label'),
    titles: [...panel.querySelectorAll('.axis-title')].filter(shown).map((t) => t.textContent),
    hint: hint && shown(hint) ? hint.textContent : null,
    pickers: [...panel.querySelectorAll('select.layer, select.head')].filter(shown).map((s) => s.className),
  };
});
"""


def overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    """Pairs of boxes (left, top, right, bottom) that share more than half a pixel each way."""
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[i + 1 :], i + 1)
        if min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5
    ]


def inside(inner: list[float], outer: list[float]) -> bool:
    return all(inner[k] >= outer[k] - 0.5 for k in (0, 1)) and all(inner[k] <= outer[k] + 0.5 for k in (2, 3))


@pytest.mark.parametrize("width", [1400, 420])
def test_a_long_sentence_shows_every_column_and_label(
    browser: object, two_models: str, trained_run: Path, corpus: Path, width: int, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    open_page(driver, two_models, width)
    driver.find_element(By.ID, "add").click()  # type: ignore[attr-defined]
    WebDriverWait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".panel")) == 2)
    translate(driver, long_sentence(trained_run, corpus))
    driver.save_screenshot(str(tmp_path / f"explorer-{width}.png"))  # type: ignore[attr-defined]

    rnn, transformer = driver.execute_script(GEOMETRY)  # type: ignore[attr-defined]
    assert rnn["model"] == "rnn-de-en" and transformer["model"] == trained_run.name
    assert len(transformer["cols"]) == LONG
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width  # type: ignore[attr-defined]
    for panel in (rnn, transformer):
        frame = panel["frame"]
        assert panel["frameBox"][0] >= 0 and panel["frameBox"][1] <= width  # the frame lies in the window
        for label in panel["cols"] + panel["rows"]:
            assert inside(label["box"], label["svg"]), label  # not cut off by its SVG's edge
            assert inside(label["svg"], [0, 0, frame["scroll"], frame["height"]]), label  # within the scroll
            assert label["seen"], label  # scrolled into view, nothing hides it
        assert overlapping([label["box"] for label in panel["cols"]]) == []
        assert overlapping([label["box"] for label in panel["rows"]]) == []
        assert [title.split()[0] for title in panel["titles"]] == ["source", "output"]
        if frame["scroll"] > frame["client"]:
            assert panel["hint"] is not None and "scroll" in panel["hint"], panel["hint"]
        else:
            assert panel["hint"] is None
    if width == 1400:  # a wide window fits all 40 columns: each panel takes the whole row
        assert transformer["frame"]["scroll"] <= transformer["frame"]["client"]
    else:  # a narrow one scrolls, and says so
        assert transformer["frame"]["scroll"] > transformer["frame"]["client"]
    assert rnn["pickers"] == []  # one layer, one head: nothing to pick
    assert transformer["pickers"] == ["layer", "head"]


def test_the_placeholder_is_a_sentence_in_the_source_language(browser: object, two_models: str) -> None:
    from selenium.webdriver.common.by import By

    driver = browser
    open_page(driver, two_models)  # German first
    placeholder = driver.find_element(By.ID, "text").get_attribute("placeholder")  # type: ignore[attr-defined]
    assert placeholder == driver.execute_script("return placeholderFor('de')")  # type: ignore[attr-defined]
    languages = ["de", "en", "fr", "cs"]
    sentences = driver.execute_script(f"return {languages}.map(placeholderFor)")  # type: ignore[attr-defined]
    assert len(set(sentences)) == len(languages) and all(len(s.split()) >= 4 for s in sentences)
    assert driver.execute_script("return placeholderFor('src')") == sentences[1]  # type: ignore[attr-defined]


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


def test_a_multilingual_model_translates_into_the_direction_picked(
    browser: object, learned_multilingual: Path
) -> None:
    """The panel of a multilingual model lists its directions; the one picked is the translation's, and its
    heatmap shows that direction's attention."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    text = (learned_multilingual.parent / "data" / "test.xa").read_text().splitlines()[0]
    served = start(learned_multilingual)
    try:
        driver = browser
        open_page(driver, served.url)
        panel = driver.find_element(By.CSS_SELECTOR, ".panel")  # type: ignore[attr-defined]
        models = [option.text for option in panel.find_elements(By.CSS_SELECTOR, "select.model option")]
        assert models == [f"{learned_multilingual.name} (4 directions)"]
        picker = Select(panel.find_element(By.CSS_SELECTOR, "select.direction"))
        assert [option.text for option in picker.options] == ["xa → xb", "xb → xa", "xa → xc", "xc → xa"]
        assert picker.first_selected_option.text == "xa → xb"  # the default of the first pair
        picker.select_by_visible_text("xa → xc")
        driver.find_element(By.ID, "text").send_keys(text)  # type: ignore[attr-defined]
        driver.find_element(By.ID, "translate").click()  # type: ignore[attr-defined]
        shown = "return document.querySelector('.panel .nbest li .text')?.textContent"
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(shown))
        body = json.dumps({"q": text, "source": "xa", "target": "xc", "nbest": 5}).encode()
        request = urllib.request.Request(
            f"{served.url}/v1/translate", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            expected = json.loads(response.read())["translations"][0]["translatedText"]
        assert driver.execute_script(shown) == expected  # type: ignore[attr-defined]
        assert driver.find_elements(By.CSS_SELECTOR, ".panel rect.cell")  # type: ignore[attr-defined]
    finally:
        assert served.stop() == 0


POST_HTML = """
const [page, done] = arguments;
fetch('/translate', {method: 'POST', headers: {'Content-Type': 'application/json'},
                     body: JSON.stringify({q: page, source: 'src', target: 'tgt', format: 'html'})})
  .then((response) => response.json())
  .then((answer) => {
    const shown = document.createElement('div');
    shown.innerHTML = answer.translatedText;
    const count = (selector) => shown.querySelectorAll(selector).length;
    done([answer.translatedText, count('p'), count('b'), count('a[href="/x"]'), count('a[title]')]);
  });
"""


def test_a_page_posts_html_and_shows_the_translated_html(browser: object, server: str) -> None:
    """A page of the server's origin posts HTML to /translate with `format: html`, as a web client does, and
    the browser parses the answer into the same elements: the server's answer to the same request."""
    driver = browser
    open_page(driver, server)
    page = f'<p>nopaju <b>kaju</b> zufete <a href="/x" title="{SENTENCE}">giholo</a> fegibe</p>'
    driver.set_script_timeout(60)  # type: ignore[attr-defined]
    text, paragraphs, bold, links, titled = driver.execute_async_script(POST_HTML, page)  # type: ignore[attr-defined]
    body = json.dumps({"q": page, "source": "src", "target": "tgt", "format": "html"}).encode()
    request = urllib.request.Request(f"{server}/translate", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert text == json.loads(response.read())["translatedText"]
    assert (paragraphs, bold, links, titled) == (1, 1, 1, 1)
