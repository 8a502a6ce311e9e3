"""HTML through a translation, as Firefox's local translation does it: the page is parsed (the standard
library's HTMLParser), its block-level text read as whole sentences with the inline tags taken out, and each
inline tag put back around the output words that the translation's word alignment links to the words it
wrapped. Block-level tags end a sentence; inline ones (INLINE) never do.

- Left as they are: script, style, pre, textarea and the like (KEPT), comments, the doctype, every attribute
  but `title` and `alt` (TRANSLATED), and the code, img and other atoms of ATOMS (kept whole, placed between
  words as inline tags without words are). Entities of the text are read as characters and written back as
  text (`&`, `<`, `>` escaped; an entity the model wrote is read first, never escaped twice): the page stays
  well-formed.
- A `title` or `alt` (outside the kept elements) is translated as a sentence of its own, after the blocks'
  sentences: its tag is written again with the translation in place of the value, every other attribute as
  it was read (quoted, entities escaped).
- An inline tag goes around the output words linked to its words (from the first to the last: a tag never
  splits); a child is kept inside its parent and after its earlier siblings. A tag that wraps words is never
  left empty while its parent holds an output word no sibling took: with no word linked (a word the links
  gave to a neighbour, as "Eine" in "Eine Katze" → "A cat" when both words link to "Katze"), it goes around
  the output word where its words lie on the diagonal (their place in the source, scaled to the output's
  length); when an earlier sibling took its words, around the free output word nearest them. Only a tag with
  no word to take, or none free, is kept empty, before the output word linked to the next source word (at the
  end of its parent when none is).
- An inline tag left open at the end of its block is closed there; an end tag that closes nothing open in the
  block is dropped.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, NamedTuple

from nmt.errors import UserError

if TYPE_CHECKING:
    from nmt.data.terminology import TermWriter
    from nmt.decode.languages import Translates


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


INLINE = _names(
    "a abbr b bdi bdo cite data del dfn em font i ins label mark q s small span strong sub sup time u"
)
ATOMS = _names("code kbd samp var img wbr math svg")  # inline, kept whole
KEPT = _names("script style pre textarea template noscript")  # blocks kept whole
ENDS_P = _names(  # a start tag of these ends an open p, as in a browser
    "address article aside blockquote details div dl fieldset figure footer form h1 h2 h3 h4 h5 h6 header hr "
    "main menu nav ol p pre section table ul"
)
IMPLIED = _names("li dt dd tr td th option")  # another one ends the one open
VOID = _names("area base br col embed hr img input link meta param source track wbr")
TRANSLATED = ("title", "alt")  # the attributes whose text is translated
MAX_INLINE_DEPTH = 100  # inline tags open inside one another: each is a level of the writer's recursion
WORD = re.compile(r"\S+")
Link = tuple[int, int]  # (source word, output word)


@dataclass
class Element:
    """An inline tag of a block: its start tag as written, the characters of the block's text it wraps
    (`start`, `end`), its children; an atom's `inside` is kept as written. `end_tag`: as written, or made
    where the block ended it (empty for a void tag)."""

    start_tag: str
    name: str
    start: int
    end: int = -1
    children: list[Element] = field(default_factory=list)
    inside: str | None = None
    end_tag: str = ""


@dataclass
class Block:
    """A run of text and inline tags between block-level tags: the text (entities read), its tags, and the
    block as written (written back when it has no word)."""

    text: str = ""
    elements: list[Element] = field(default_factory=list)
    raw: str = ""

    @property
    def words(self) -> list[str]:
        return WORD.findall(self.text)

    @property
    def line(self) -> str:
        """The sentence to translate: the block's words, one space apart."""
        return " ".join(self.words)

    def boundaries(self) -> set[int]:
        """Where its inline tags begin and end, as characters of `line` (a tag between two words: at the end
        of the first, or at the start of the second when it begins there)."""
        found = list(WORD.finditer(self.text))
        starts = [word.start() for word in found]
        line_starts = [0]
        for word in found[:-1]:
            line_starts.append(line_starts[-1] + word.end() - word.start() + 1)
        at = set()
        for element in _all(self.elements):
            for edge in (element.start, element.end):
                k = bisect.bisect_right(starts, edge) - 1  # the last word that starts at or before it
                if k < 0:
                    at.add(0)
                else:
                    at.add(line_starts[k] + min(edge - starts[k], found[k].end() - starts[k]))
        return at


def _all(elements: list[Element]) -> Iterator[Element]:
    """`elements` and every element inside them."""
    for element in elements:
        yield element
        yield from _all(element.children)


class _Parser(HTMLParser):
    """The standard library's HTMLParser, but for a `<![` that opens no section it knows."""

    def parse_marked_section(self, i: int, report: bool = True) -> int:
        """A marked section the standard library knows (`<![CDATA[…]]>`, `<![if …]>`); any other `<![` as a
        browser reads it, a comment up to the next `>` (the library raises AssertionError)."""
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            end = self.rawdata.find(">", i)
            if end < 0:
                return -1
            if report:
                self.handle_comment(self.rawdata[i + 2 : end])
            return end + 1


class _Reader(_Parser):
    """The page as a list of parts: markup written back as it is, and blocks to translate."""

    def __init__(self, marker: str) -> None:
        super().__init__(convert_charrefs=False)
        self.marker = marker  # stands for a translated attribute's value until the page is written
        self.attributes: list[str] = []  # the text of each translated attribute, in order
        self.parts: list[str | Block] = []
        self.block = Block()
        self.open: list[Element] = []  # the inline tags open in the block, outermost first
        self.kept: tuple[str, int, list[str]] | None = None  # a KEPT or ATOMS element: name, depth, raw
        self.blocks: list[str] = []  # the block-level elements open, outermost first

    def _keep(self, raw: str, name: str | None = None, closing: bool = False) -> bool:
        """Inside a kept element, `raw` goes into it; True when it was taken."""
        if self.kept is None:
            return False
        kept_name, depth, pieces = self.kept
        depth += (name == kept_name) * (-1 if closing else 1)
        if depth > 0:
            pieces.append(raw)
            self.kept = (kept_name, depth, pieces)
            return True
        self.kept = None
        inside, tag = "".join(pieces[1:]), pieces[0]
        if kept_name in KEPT:
            self._flush()
            self.parts.append(tag + inside + raw)
        else:
            self._atom(tag, kept_name, inside, raw)
        return True

    def _atom(self, start_tag: str, name: str, inside: str = "", end_tag: str = "") -> None:
        """An element kept whole (or a comment) between the words of the block."""
        here = len(self.block.text)
        siblings = self.open[-1].children if self.open else self.block.elements
        siblings.append(Element(start_tag, name, here, here, inside=inside, end_tag=end_tag))
        self.block.raw += start_tag + inside + end_tag

    def _flush(self) -> None:
        """End the block: its open tags are closed, and it is written as a part."""
        for element in reversed(self.open):
            element.end, element.end_tag = len(self.block.text), f"</{element.name}>"
        if self.block.raw and not self.block.words:
            self.block.raw += "".join(element.end_tag for element in reversed(self.open))
        self.open = []
        if self.block.raw:
            self.parts.append(self.block if self.block.words else self.block.raw)
        self.block = Block()

    def _translatable(self, tag: str, attrs: list[tuple[str, str | None]], raw: str, closed: bool) -> str:
        """`raw`, or the start tag written again with a marker for each `title`/`alt` that holds words."""
        texts = {name: " ".join(value.split()) for name, value in attrs if name in TRANSLATED and value}
        if not any(texts.values()):
            return raw
        written = []
        for name, value in attrs:
            if texts.get(name):
                written.append(f' {name}="{self.marker}{len(self.attributes)}{self.marker}"')
                self.attributes.append(texts[name])
            else:
                written.append(f" {name}" if value is None else f' {name}="{html.escape(value)}"')
        return f"<{tag}{''.join(written)}{' /' if closed else ''}>"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        if self._keep(raw, tag):
            return
        if tag in KEPT or (tag in ATOMS and tag not in VOID):
            self.kept = (tag, 1, [raw])
            return
        raw = self._translatable(tag, attrs, raw, closed=False)
        if tag in ATOMS:
            self._atom(raw, tag)
        elif tag in INLINE:
            if len(self.open) == MAX_INLINE_DEPTH:
                raise UserError(
                    f"the page opens more than {MAX_INLINE_DEPTH} inline tags (b, i, span, …) inside one "
                    f"another; close them where they end"
                )
            element = Element(raw, tag, len(self.block.text))
            (self.open[-1].children if self.open else self.block.elements).append(element)
            self.open.append(element)
            self.block.raw += raw
        else:
            self._flush()
            top = self.blocks[-1] if self.blocks else None
            if (top == "p" and tag in ENDS_P) or (top == tag and tag in IMPLIED):
                self.parts.append(f"</{self.blocks.pop()}>")  # as a browser ends them
            self.parts.append(raw)
            if tag not in VOID:
                self.blocks.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}/>"
        if self._keep(raw):
            return
        raw = self._translatable(tag, attrs, raw, closed=True)
        if tag in INLINE or tag in ATOMS:
            self._atom(raw, tag)
        else:
            self._flush()
            self.parts.append(raw)

    def handle_endtag(self, tag: str) -> None:
        raw = f"</{tag}>"
        if self._keep(raw, tag, closing=True):
            return
        if tag in INLINE or tag in ATOMS:
            found = [i for i, element in enumerate(self.open) if element.name == tag]
            if found:  # it closes the tags opened inside it too
                for element in reversed(self.open[found[-1] :]):
                    element.end = len(self.block.text)
                    element.end_tag = raw if element is self.open[found[-1]] else f"</{element.name}>"
                del self.open[found[-1] :]
                self.block.raw += raw
            return  # an end tag that closes nothing is dropped
        self._flush()
        if tag in self.blocks:  # it closes the elements opened inside it too; else it is dropped
            while (name := self.blocks.pop()) != tag:
                self.parts.append(f"</{name}>")
            self.parts.append(raw)

    def handle_data(self, data: str) -> None:
        if self._keep(data):
            return
        self.block.text += html.unescape(data)
        self.block.raw += data

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")

    def _markup(self, raw: str) -> None:
        if self._keep(raw):
            return
        if self.block.raw:
            self._atom(raw, "")
        else:
            self.parts.append(raw)

    def handle_comment(self, data: str) -> None:
        self._markup(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._markup(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._markup(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        close = "]>" if data.lower().startswith(("if", "else", "endif")) else "]]>"  # as the parser found it
        self._markup(f"<![{data}{close}")


@dataclass(frozen=True)
class Page:
    """An HTML page read for translation: markup to write back as it is, blocks to translate, and the text
    of its `title` and `alt` attributes (each at `marker`, its number, `marker` in the markup)."""

    parts: list[str | Block]
    attributes: list[str] = field(default_factory=list)
    marker: str = ""

    @property
    def lines(self) -> list[str]:
        """The sentence of each block, in order, then each attribute's: what to translate."""
        return [part.line for part in self.parts if isinstance(part, Block)] + self.attributes

    def boundaries(self) -> list[set[int]]:
        """For each of `lines`, where its inline tags begin and end (Block.boundaries; none in attributes)."""
        blocks = [part.boundaries() for part in self.parts if isinstance(part, Block)]
        return blocks + [set() for _ in self.attributes]

    def written(self, translations: Iterable[tuple[str, Sequence[Link]]]) -> str:
        """The page with each block written as its translation (text and word links, one per line of
        `lines`) with its tags placed, and each attribute's value as its translation."""
        found = iter(translations)
        written = []
        for part in self.parts:
            if isinstance(part, Block):
                text, links = next(found)
                written.append(write_block(part, text.split(), links))
            else:
                written.append(part)
        values = [output_text(text, quote=True) for text, _ in found]  # the attributes', in order
        marker = re.escape(self.marker)
        marked = re.compile(f"{marker}(\\d+){marker}")  # one pass over the page, however many attributes
        return marked.sub(lambda match: values[int(match.group(1))], "".join(written))


def read_page(page: str) -> Page:
    """`page` read by the standard library's HTMLParser into markup and blocks; elements and a comment left
    open are closed at the end. A page nesting more than MAX_INLINE_DEPTH inline tags is a UserError."""
    marker = "\ue000"  # a private-use character the page does not hold
    while marker in page:
        marker += "\ue000"
    reader = _Reader(marker)
    reader.feed(page)
    if reader.rawdata.startswith("<!--") and reader.cdata_elem is None:  # open to the end, as in a browser
        reader.handle_comment(reader.rawdata[4:])
        reader.rawdata = ""
    reader.close()
    if reader.kept is not None:  # a kept element never closed (the parser holds a script's rest back)
        name, _, pieces = reader.kept
        reader.kept = (name, 1, [*pieces, reader.rawdata])
        reader._keep(f"</{name}>", name, closing=True)
    elif reader.rawdata:
        reader.handle_data(reader.rawdata)
    reader._flush()
    reader.parts += [f"</{name}>" for name in reversed(reader.blocks)]
    return Page(reader.parts, reader.attributes, marker)


def translate_page(
    page: str,
    translate: Callable[[list[str]], list[tuple[str, Sequence[Link]]]],
    terms: TermWriter | None = None,
) -> str:
    """`page` with the text of its blocks translated by `translate` (lines to their translation and word
    links) and its inline tags placed on the linked words; with `terms`, each line gets a glossary's terms
    written in first (but a term a tag begins or ends inside: a term stays inside its tags), and the links of
    the words written in count as links of the term's own words."""
    read = read_page(page)
    if terms is None:
        return read.written(translate(read.lines) if read.lines else [])
    written = [terms.line(line, at) for line, at in zip(read.lines, read.boundaries(), strict=True)]
    found = translate([line.text for line in written]) if written else []
    plain = [(text, line.plain_links(links)) for (text, links), line in zip(found, written, strict=True)]
    return read.written(plain)


def translated_page(translator: Translates, page: str, terms: TermWriter | None = None) -> str:
    """`page` translated by `translator`, each block sentence by sentence (nmt/decode/running_text.py), its
    tags placed by the word links of each best translation, its language the target's (`with_language`);
    with `terms`, a glossary's terms written into its lines (`translate_page`)."""
    from nmt.decode.running_text import translate_paragraphs

    def aligned(lines: list[str]) -> list[tuple[str, Sequence[Link]]]:
        found = translate_paragraphs(translator, lines, split=True, alignments=True)
        return [(block.joined.best.text, block.joined.best.alignment or []) for block in found]

    return with_language(translate_page(page, aligned, terms), translator.target)


@dataclass
class Placed:
    """An element placed on the output words [start, end); `start == end`: kept empty at that position."""

    element: Element
    start: int
    end: int
    order: int
    children: list[Placed] = field(default_factory=list)


def write_block(block: Block, output: Sequence[str], links: Sequence[Link]) -> str:
    """The block written with `output` (its translation's words) for its text and its tags placed by `links`
    (source word, output word), between the block's own leading and trailing whitespace."""
    found = list(WORD.finditer(block.text))
    spans = Spans([m.start() for m in found], [m.end() for m in found])
    valid = sorted((i, j) for i, j in links if i < len(found) and j < len(output))
    places = _place(block.elements, spans, valid, 0, len(output), iter(range(1_000_000)), len(output))
    lead = block.text[: len(block.text) - len(block.text.lstrip())]
    trail = block.text[len(block.text.rstrip()) :]
    return html.escape(lead, quote=False) + _write(places, output) + html.escape(trail, quote=False)


class Spans(NamedTuple):
    """Where each source word of a block's text starts and ends (characters; both ascending)."""

    starts: list[int]
    ends: list[int]

    def words(self, start: int, end: int) -> range:
        """The words that characters [start, end) touch."""
        return range(bisect.bisect_right(self.ends, start), bisect.bisect_left(self.starts, end))

    def before(self, at: int) -> int:
        """How many words start before character `at`."""
        return bisect.bisect_left(self.starts, at)


def _place(
    elements: list[Element],
    spans: Spans,
    links: list[Link],
    low: int,
    high: int,
    order: Iterator[int],
    outputs: int,
) -> list[Placed]:
    """Each element placed within output words [low, high) of the `outputs`, apart from its earlier siblings
    (`links` sorted)."""
    placed: list[Placed] = []
    for element in elements:
        words = spans.words(element.start, element.end)
        linked = links[bisect.bisect_left(links, (words.start,)) : bisect.bisect_left(links, (words.stop,))]
        targets = [j for _, j in linked]
        start, end = (min(targets), max(targets) + 1) if targets and element.inside is None else (0, 0)
        start, end = max(start, low), min(end, high)
        for other in placed:  # siblings never overlap: the later one gives way
            if other.start < other.end and start < other.end and other.start < end:
                start, end = (other.end, end) if start >= other.start else (start, other.start)
        if start >= end and words and element.inside is None:  # it wraps words: never left empty
            diagonal = (words.start + words.stop) / 2 / len(spans.starts) * outputs  # their middle, scaled
            aim = min(targets) + 0.5 if targets else diagonal
            start, end = _nearest_free(aim, low, high, placed)
        if start >= end:
            after = spans.before(element.end) if words else spans.before(element.start)
            start = end = _position(after, links, low, high, placed)
        here = Placed(element, start, end, next(order))
        if start < end:
            here.children = _place(element.children, spans, links, start, end, order, outputs)
        placed.append(here)
    return placed


def _nearest_free(aim: float, low: int, high: int, placed: list[Placed]) -> tuple[int, int]:
    """The output word in [low, high) that no sibling holds whose middle is nearest `aim` (a place on the
    output, in words; of two as near, the first), as a span [j, j + 1); (0, 0) when every word is held."""
    free = [j for j in range(low, high) if not any(p.start <= j < p.end for p in placed)]
    if not free:
        return 0, 0
    nearest = min(free, key=lambda j: abs(j + 0.5 - aim))
    return nearest, nearest + 1


def _position(next_word: int, links: list[Link], low: int, high: int, placed: list[Placed]) -> int:
    """Where an empty element goes: before the output word linked to the first linked source word from
    `next_word` on, within [low, high] and outside its siblings (the end of [low, high] when none is);
    `links` sorted."""
    later = ((i, j) for i, j in links[bisect.bisect_left(links, (next_word,)) :] if low <= j < high)
    first = next(later, None)  # the first such source word, and its first (smallest) output word
    position = high if first is None else first[1]
    for other in placed:
        if other.start < position < other.end:
            position = other.end
    return position


def _write(places: list[Placed], output: Sequence[str]) -> str:
    """The output words with the placed elements around them: a space before each word and each element
    kept whole (an atom, an empty element) but the first, the start tags that open before it after that
    space."""
    written: list[str] = []
    pending: list[str] = []  # markup waiting for the next word (after its space)
    first = True

    def words(low: int, high: int) -> None:
        nonlocal first
        for word in output[low:high]:
            written.append(("" if first else " ") + "".join(pending) + output_text(word))
            pending.clear()
            first = False

    def element(place: Placed) -> None:
        nonlocal first
        if place.start == place.end:  # a token of its own, as a word
            written.append(("" if first else " ") + "".join(pending) + _whole(place.element))
            pending.clear()
            first = False
            return
        pending.append(place.element.start_tag)
        inside(place.children, place.start, place.end)
        written.append("".join(pending) + place.element.end_tag)
        pending.clear()

    def inside(children: list[Placed], low: int, high: int) -> None:
        at = low
        for child in sorted(children, key=lambda p: (p.start, p.start < p.end, p.order)):
            words(at, child.start)
            element(child)
            at = max(at, child.end)
        words(at, high)

    inside(places, 0, len(output))
    return "".join(written) + "".join(pending)


def output_text(text: str, quote: bool = False) -> str:
    """A translation's text as page text: escaped once, whatever entities the model wrote (one trained on
    text that held `&amp;` writes it), so a page never shows `&amp;amp;`."""
    return html.escape(html.unescape(text), quote=quote)


def _whole(element: Element) -> str:
    """An element kept empty (an atom: with what it held), its children inside it, empty too."""
    inside = element.inside if element.inside is not None else "".join(map(_whole, element.children))
    return element.start_tag + inside + element.end_tag


class _LangTags(_Parser):
    """Where a page's start tags that name a language (`lang`, `xml:lang`) are, as written: (line, column)
    and their text; but those of the elements left as they are (KEPT, ATOMS but img) and inside them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.found: list[tuple[tuple[int, int], str]] = []
        self.kept: list[str] = []  # the elements open inside a kept one, the kept one first

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.kept or tag in KEPT or (tag in ATOMS and tag not in VOID):  # an img's alt is translated
            if tag not in VOID:
                self.kept.append(tag)
        elif any(name in ("lang", "xml:lang") for name, _ in attrs):
            self.found.append((self.getpos(), self.get_starttag_text() or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.kept:
            while self.kept.pop() != tag:
                pass


LANG_ATTRIBUTE = re.compile(r"""(\s(?:xml:)?lang\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)""", re.IGNORECASE)


def with_language(page: str, lang: str) -> str:
    """`page` with the `lang` (and `xml:lang`) attribute of its `html` element, and of every element whose
    text was translated, set to `lang` (their text is in the target language now); the elements left as they
    are keep theirs; `lang` "" (not known) leaves the page as it is."""
    reader = _LangTags()
    reader.feed(page)
    if not lang:
        return page
    line_starts = [0]  # lines as HTMLParser counts them
    for text in page.split("\n"):
        line_starts.append(line_starts[-1] + len(text) + 1)
    written = []
    at = 0
    for (line, column), tag in reader.found:
        start = line_starts[line - 1] + column
        written += [page[at:start], LANG_ATTRIBUTE.sub(lambda m: f'{m.group(1)}"{html.escape(lang)}"', tag)]
        at = start + len(tag)
    return "".join(written) + page[at:]
