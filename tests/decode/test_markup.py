"""HTML through a translation (nmt/decode/markup.py), with translations written in the tests: blocks are
whole sentences, inline tags follow the words they wrapped through the word links, what is not text is left
as it is; every page written is well-formed with every tag kept, whatever the page and the links."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from nmt.decode.markup import Link, read_page, translate_page, with_language
from tests.markup_checks import assert_well_formed_with_every_tag

Translate = Callable[[list[str]], list[tuple[str, Sequence[Link]]]]


def same(lines: list[str]) -> list[tuple[str, Sequence[Link]]]:
    """Each line as its own translation, each word linked to itself."""
    return [(line, [(i, i) for i in range(len(line.split()))]) for line in lines]


def reversed_words(lines: list[str]) -> list[tuple[str, Sequence[Link]]]:
    """Each line's words in reverse order, upper-cased, each linked to its source word."""
    found = []
    for line in lines:
        n = len(line.split())
        found.append((" ".join(reversed(line.upper().split())), [(i, n - 1 - i) for i in range(n)]))
    return found


def test_a_sentence_is_never_split_at_an_inline_tag_and_blocks_are_sentences() -> None:
    page = '<div><p>The <b>red</b> <a href="/car">car</a> is <em>very <i>fast</i></em> now.</p>'
    page += "<p>Next one</p></div>"
    assert read_page(page).lines == ["The red car is very fast now.", "Next one"]
    assert translate_page(page, same) == page


def test_a_tag_around_part_of_a_word_goes_around_the_whole_word() -> None:
    """Words are what whitespace separates, as the word links count them."""
    assert (
        translate_page("<p>a <i>fast</i>. un<b>closed</b></p>", same)
        == "<p>a <i>fast.</i> <b>unclosed</b></p>"
    )


def test_tags_follow_their_words() -> None:
    page = '<p>The <b>red</b> <a href="/car">car</a> is <em>very <i>fast</i></em></p>'
    assert translate_page(page, reversed_words) == (
        '<p><em><i>FAST</i> VERY</em> IS <a href="/car">CAR</a> <b>RED</b> THE</p>'
    )


def test_script_style_pre_code_comments_and_attributes_but_title_and_alt_are_left_as_they_are() -> None:
    page = (
        "<html><head><style>p { color: red }</style><script>if (a < b && c) go('x y');</script></head>"
        '<body><p title="a title" class="x">Run <code>ls -l &amp; wait</code> now <!-- a note --> please</p>'
        "<pre>keep  <b>this</b>\n as is</pre></body></html>"
    )
    translated = translate_page(page, reversed_words)
    for kept in (
        "<style>p { color: red }</style>",
        "<script>if (a < b && c) go('x y');</script>",
        '<p title="TITLE A" class="x">',  # title is translated, class left
        "<code>ls -l &amp; wait</code>",
        "<!-- a note -->",
        "<pre>keep  <b>this</b>\n as is</pre>",
    ):
        assert kept in translated
    assert read_page(page).lines == ["Run now please", "a title"]
    assert_well_formed_with_every_tag(page, translated)


def test_marked_sections_are_written_as_read_and_a_stray_one_is_a_comment_as_in_a_browser() -> None:
    page = "<![if !IE]><p>a <![CDATA[x > y]]> b <![foo]> c <![ d</p><![endif]>"
    assert read_page(page).lines == ["a b c"]
    translated = translate_page(page, reversed_words)
    for kept in ("<![if !IE]>", "<![CDATA[x > y]]>", "<!--[foo]-->", "<!--[ d</p-->", "<![endif]>"):
        assert kept in translated


def test_a_stray_marked_section_kept_in_an_atom_still_lets_the_page_take_the_target_language() -> None:
    translated = translate_page("<html lang=de><p>a</p><svg>b<![ \n", same)
    assert with_language(translated, "en") == '<html lang="en"><p>a</p><svg>b<![ \n</svg></html>'


def test_a_comment_left_open_runs_to_the_end_as_in_a_browser_and_is_not_translated() -> None:
    page = "<p>a b</p><!-- an unfinished > note"
    assert read_page(page).lines == ["a b"]
    assert translate_page(page, reversed_words) == "<p>B A</p><!-- an unfinished > note-->"
    assert translate_page("<script><!-- x", same) == "<script><!-- x</script>"  # a script's text stays its


def test_title_and_alt_are_translated_as_sentences_of_their_own() -> None:
    page = (
        '<p>A <img src="a.png" alt="a  red car" width=3> and <a href="/x?a=1&amp;b=2" title=\'say "hi"\'>link'
        '</a></p><img alt="" src=b.png/><abbr title>t</abbr><pre title="kept">x</pre>'
    )
    read = read_page(page)
    assert read.lines == ["A and link", "t", "a red car", 'say "hi"']  # the blocks, then the attributes
    translated = translate_page(page, reversed_words)
    assert translated == (
        '<p><a href="/x?a=1&amp;b=2" title="&quot;HI&quot; SAY">LINK</a> '
        '<img src="a.png" alt="CAR RED A" width="3"> AND A</p>'  # other attributes quoted, as read
        '<img alt="" src=b.png/> <abbr title>T</abbr><pre title="kept">x</pre>'  # empty ones, pre: as written
    )
    assert_well_formed_with_every_tag(page, translated)


def test_a_page_holding_the_marker_character_keeps_it() -> None:
    page = '<p title="x">\ue000 a \ue0000\ue000 b</p>'
    assert translate_page(page, same) == page


def test_entities_are_read_as_text_and_written_as_entities() -> None:
    page = "<p>Tom &amp; Jerry &lt;3 caf&eacute; &#169;</p>"
    assert read_page(page).lines == ["Tom & Jerry <3 café ©"]
    assert translate_page(page, same) == "<p>Tom &amp; Jerry &lt;3 café ©</p>"


def test_an_entity_the_model_wrote_is_never_escaped_twice() -> None:
    """A model trained on text that held `&amp;` writes it: the page shows `&`, as `&amp;` (not `&amp;amp;`);
    so does a translated attribute."""
    wrote: Translate = lambda lines: [  # noqa: E731
        (line.replace("&", "&amp;").replace('"', "&quot;"), [(i, i) for i in range(len(line.split()))])
        for line in lines
    ]
    page = '<p>Stein &amp; Fliese</p><img alt="Q&amp;A &quot;hier&quot;">'
    assert translate_page(page, wrote) == '<p>Stein &amp; Fliese</p><img alt="Q&amp;A &quot;hier&quot;">'


def test_a_tag_whose_words_the_links_gave_to_a_neighbour_is_never_left_empty() -> None:
    """`<i>Eine</i> Katze` → `A cat` with both output words linked to "Katze": the tag goes around "A", where
    its word lies on the diagonal (it went, empty, before "A"); so does a tag whose words no link reaches."""
    both: Translate = lambda lines: [("A cat", [(1, 0), (1, 1)])]  # noqa: E731
    assert translate_page("<p><i>Eine</i> Katze</p>", both) == "<p><i>A</i> cat</p>"
    dropped: Translate = lambda lines: [("x y z", [(0, 0), (2, 1), (3, 2)])]  # noqa: E731
    assert translate_page("<p>a <b>b</b> c d</p>", dropped) == "<p>x <b>y</b> z</p>"
    last: Translate = lambda lines: [("x y", [(0, 0), (1, 1)])]  # noqa: E731
    assert translate_page("<p>a b <i>c</i></p>", last) == "<p>x <i>y</i></p>"
    nothing: Translate = lambda lines: [("x y", [])]  # noqa: E731
    assert translate_page("<p><b>a</b> <i>b</i></p>", nothing) == "<p><b>x</b> <i>y</i></p>"


def test_a_tag_whose_words_an_earlier_sibling_took_takes_the_free_word_nearest_them() -> None:
    one: Translate = lambda lines: [("dog running", [(0, 0), (1, 0)])]  # noqa: E731
    assert translate_page("<p><b>Hund</b> <i>rennt</i></p>", one) == "<p><b>dog</b> <i>running</i></p>"


def test_a_tag_is_kept_empty_only_with_no_word_to_wrap_or_none_free() -> None:
    """An element without words stays empty before the next word; two tags whose parent holds one output
    word: the second has none free."""
    same_words = same(["a b c"])
    assert translate_page("<p>a <b></b>b c</p>", lambda lines: same_words) == "<p>a <b></b> b c</p>"
    single: Translate = lambda lines: [("x", [(0, 0), (1, 0)])]  # noqa: E731
    assert translate_page("<p><u><b>a</b> <i>b</i></u></p>", single) == "<p><u><b>x</b> <i></i></u></p>"


def test_a_child_stays_inside_its_parent_and_siblings_never_overlap() -> None:
    page = "<p><b>a <i>b</i></b> <u>c</u></p>"
    crossing: Translate = lambda lines: [("x y z", [(0, 0), (1, 2), (2, 1)])]  # noqa: E731
    translated = translate_page(page, crossing)
    assert_well_formed_with_every_tag(page, translated)
    assert translated == "<p><b>x <i></i><u>y</u> z</b></p>" or "<u>" in translated


@pytest.mark.parametrize(
    "page",
    [
        "<p>un<b>closed <i>tags</p><p>stray</b> end</p>",
        "<div><span>a <b>b <i>c</span> d</div>",
        "<p>a < b > c & d &bogus; &#xZZ;</p>",
        "<p>half <b>bo</b>ld word</p>",
        "<ul><li>one <b>two<li>three</b></ul>",
        "<p>an <img src=a.png alt='an image'> and <br> a <wbr> break</p>",
        "<p>text <!-- comment --> and <![CDATA[ x ]]> more</p>",
        "<p>unclosed <script>var a = '<b>';",
        "<p>unclosed <code>code <b>x</b>",
        "<b><i>nested <a href='#'>deep <span>deeper <em>deepest</em></span></a></i></b>",
        "no tags at all",
        "",
        "<p>a <script>if (a < b && c > d) { x = '<i>'; }</script> b <style>p > b { x: 1 }</style> c</p>",
        "<!DOCTYPE html><html><head><title>T &amp; U</title></head><body><P>Up<B>PER</B></P></body></html>",
        "<p>self <b/> closed <i /> and <a href='x>y' title=\"a > b\">quoted</a> attributes</p>",
        "<p>a <b>comment <!-- <i>not a tag</i> --> inside</b> and &lt;b&gt; text</p>",
        "<p>x</i></b></p></div> stray ends <b>b</p>c</b>",
        "<p>caf&eacute; &#233;t&#xE9; &nbsp; <b>&amp;&amp;</b>&copy</p>",
        "<b><i><u><s>a</b></i></u></s>",
    ],
)
def test_hostile_pages_are_written_well_formed_with_every_tag(page: str) -> None:
    for translate in (same, reversed_words):
        assert_well_formed_with_every_tag(page, translate_page(page, translate))


def random_page(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.35 and depth < 4:
            tag = rng.choice(["b", "i", "a", "span", "em", "sub"])
            parts.append(f"<{tag}>{random_page(rng, depth + 1)}</{tag}>")
        elif choice < 0.4:
            parts.append(rng.choice(["<br>", "<img src=x>", "<!-- c -->", "<code>c d</code>", "&amp;"]))
        elif choice < 0.45 and depth == 0:
            parts.append(rng.choice(["</p><p>", "<div>", "</b>", "<i>"]))
        else:
            parts.append(" ".join(rng.choice(["a", "bb", "c", "dd"]) for _ in range(rng.randint(1, 3))))
        parts.append(rng.choice(["", " ", "  "]))
    return "".join(parts)


def test_random_pages_and_random_links_are_written_well_formed_with_every_tag() -> None:
    rng = random.Random(0)

    def scrambled(lines: list[str]) -> list[tuple[str, Sequence[Link]]]:
        found = []
        for line in lines:
            source = line.split()
            output = [f"w{k}" for k in range(rng.randint(1, len(source) + 2))]
            links = [(i, rng.randrange(len(output))) for i in range(len(source)) if rng.random() < 0.8]
            found.append((" ".join(output), sorted(set(links))))
        return found

    for _ in range(500):
        page = f"<p>{random_page(rng)}</p>"
        translated = translate_page(page, scrambled)
        assert_well_formed_with_every_tag(page, translated)
        assert read_page(translate_page(page, same)).lines == read_page(page).lines
