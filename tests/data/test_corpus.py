"""Parallel text on disk: locating split files, UTF-8 checks, alignment, cleaning and TSV corpora."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from nmt.config.sections import DataConfig
from nmt.data.corpus import (
    ParallelText,
    SplitFiles,
    count_lines,
    decode_lines,
    line_chunks,
    normalize,
    pair_chunks,
    read_files,
)
from nmt.data.splits import language_split, read_directions
from nmt.data.synthetic import reordering_pairs, write_reordering_corpus
from nmt.errors import UserError
from tests.conftest import NO_REPORT, assert_one_line_error, copy_corpus, run_cli, train_args


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def write_pair(directory: Path, stem: str, src: str | bytes, tgt: str | bytes) -> SplitFiles:
    return SplitFiles(write(directory / f"{stem}.de", src), write(directory / f"{stem}.en", tgt))


def split_files(cfg: DataConfig, split: str) -> SplitFiles:
    """The files of `split` of a bilingual run (its one direction)."""
    return language_split(cfg, split).pair_files(cfg.directions.directions[0])


def read_split(cfg: DataConfig, split: str) -> ParallelText:
    """The pairs of `split` of a bilingual run (its one direction)."""
    (text,) = read_directions(cfg, split).values()
    return text


def error_of(call: object, *args: object) -> str:
    with pytest.raises(UserError) as info:
        call(*args)  # type: ignore[operator]
    return str(info.value)


def test_directory_with_val_and_test2016_names_resolves(tmp_path: Path) -> None:
    for stem in ("train", "val", "test2016"):
        write_pair(tmp_path, stem, "a\n", "b\n")
    cfg = DataConfig(dir=str(tmp_path))
    assert split_files(cfg, "train") == SplitFiles(tmp_path / "train.de", tmp_path / "train.en")
    assert split_files(cfg, "valid") == SplitFiles(tmp_path / "val.de", tmp_path / "val.en")
    assert split_files(cfg, "test") == SplitFiles(tmp_path / "test2016.de", tmp_path / "test2016.en")


def test_valid_is_preferred_over_dev(tmp_path: Path) -> None:
    write_pair(tmp_path, "dev", "a\n", "b\n")
    write_pair(tmp_path, "valid", "a\n", "b\n")
    assert split_files(DataConfig(dir=str(tmp_path)), "valid").src == tmp_path / "valid.de"


def test_language_codes_pick_the_files(tmp_path: Path) -> None:
    write(tmp_path / "train.src", "x\n")
    write(tmp_path / "train.tgt", "y\n")
    files = split_files(DataConfig(dir=str(tmp_path), src_lang="src", tgt_lang="tgt"), "train")
    assert files == SplitFiles(tmp_path / "train.src", tmp_path / "train.tgt")


def test_missing_directory(tmp_path: Path) -> None:
    message = error_of(split_files, DataConfig(dir=str(tmp_path / "nowhere")), "train")
    assert f"data directory {tmp_path / 'nowhere'} does not exist" in message


def test_no_directory_and_no_explicit_file_asks_for_data() -> None:
    assert "--data" in error_of(split_files, DataConfig(), "train")


def test_missing_split_lists_the_expected_names_and_the_language_flags(tmp_path: Path) -> None:
    write_pair(tmp_path, "train", "a\n", "b\n")
    message = error_of(split_files, DataConfig(dir=str(tmp_path)), "valid")
    assert "valid.de or val.de or dev.de" in message
    assert "train.de" in message  # what the directory does hold
    assert "--src-lang/--tgt-lang" in message


@pytest.mark.parametrize(
    ("present", "missing", "flag"), [("de", "en", "--tgt-lang"), ("en", "de", "--src-lang")]
)
def test_missing_language_file_names_it_and_its_flag(
    tmp_path: Path, present: str, missing: str, flag: str
) -> None:
    write(tmp_path / f"train.{present}", "a\n")
    message = error_of(split_files, DataConfig(dir=str(tmp_path)), "train")
    assert f"{tmp_path / f'train.{missing}'} does not exist" in message and flag in message


def test_explicit_prefix_and_tsv_paths_override_the_directory(tmp_path: Path) -> None:
    write_pair(tmp_path / "corpus", "news.v2", "a\n", "b\n")
    write(tmp_path / "valid.tsv", "a\tb\n")
    cfg = DataConfig(
        dir=str(tmp_path / "unused"),
        train=str(tmp_path / "corpus" / "news.v2"),
        valid=str(tmp_path / "valid.tsv"),
    )
    assert split_files(cfg, "train") == SplitFiles(
        tmp_path / "corpus/news.v2.de", tmp_path / "corpus/news.v2.en"
    )
    assert split_files(cfg, "valid") == SplitFiles(tmp_path / "valid.tsv", None)
    assert "TSV file" in error_of(split_files, DataConfig(test=str(tmp_path / "missing.tsv")), "test")


def test_read_split_cleans_and_keeps_the_pairs_aligned(tmp_path: Path) -> None:
    write_pair(tmp_path, "train", "eins\n\nzwei  drei\n   \nvier\n", "one\ntwo\n\t\n\nfour\n")
    text = read_split(DataConfig(dir=str(tmp_path)), "train")
    assert text.src == ["eins", "vier"]  # lines 2-4 each have an empty side: dropped with their partner
    assert text.tgt == ["one", "four"]
    assert len(text) == 2


def test_html_entities_of_a_corpus_are_read_as_characters_unless_kept(tmp_path: Path) -> None:
    """Multi30k's raw files hold `&amp;`, which a model would learn to write: every split, in every layout,
    is read with its entities as characters (once: `&amp;amp;` is `&amp;`), for training, the tokenizer's
    sample and evaluation alike; data.unescape_entities=false keeps them."""
    write_pair(
        tmp_path / "files", "train", "Stein &amp; Fliese\nQ&amp;amp;A\n", "tile &#38; stone\nx &quot;y\n"
    )
    write(tmp_path / "tsv" / "train.tsv", "Stein &amp; Fliese\ttile &#38; stone\n")
    write(tmp_path / "jsonl" / "train.jsonl", '{"de": "Stein &amp; Fliese", "en": "tile &#38; stone"}\n')
    for layout, train in (("files", None), ("tsv", "train.tsv"), ("jsonl", "train.jsonl")):
        directory = tmp_path / layout
        explicit = {"train": str(directory / train)} if train else {}
        for unescape, expected in ((True, "Stein & Fliese"), (False, "Stein &amp; Fliese")):
            cfg = DataConfig(dir=str(directory), unescape_entities=unescape, **explicit)
            text = read_split(cfg, "train")
            assert text.src[0] == expected, (layout, unescape)
            assert text.tgt[0] == ("tile & stone" if unescape else "tile &#38; stone")
            sample = language_split(cfg, "train").sentences("de", np.array([0]), {"en"})
            assert sample == [expected], (layout, unescape)
    text = read_split(DataConfig(dir=str(tmp_path / "files")), "train")
    assert (text.src[1], text.tgt[1]) == ("Q&amp;A", 'x "y')  # entities are read once
    files = SplitFiles(tmp_path / "files" / "train.de", tmp_path / "files" / "train.en")
    assert read_files(files, "test").src[0] == "Stein & Fliese"  # evaluate's --src/--ref files
    assert read_files(files, "test", unescape=False).src[0] == "Stein &amp; Fliese"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  a\tb  ", "a b"),
        ("a\u00a0\u00a0b", "a b"),
        ("a  b   c", "a b c"),
        ("a\rb\r", "a b"),
        ("\t \u00a0", ""),
    ],
)
def test_normalize_collapses_whitespace(line: str, expected: str) -> None:
    assert normalize(line) == expected


def test_unequal_line_counts_name_both_files_and_counts(tmp_path: Path) -> None:
    files = write_pair(tmp_path, "train", "a\nb\nc\n", "x\ny\n")
    message = error_of(read_files, files, "train")
    assert f"{files.src} has 3 lines but {files.tgt} has 2" in message


@pytest.mark.parametrize(
    ("content", "lines"),
    [
        (b"a\nb\n", ["a", "b"]),
        (b"a\nb", ["a", "b"]),  # no newline at the end
        (b"a\n\nb\n\n", ["a", "", "b", ""]),  # empty lines count
        (b"", []),
        (b"\xef\xbb\xbfa\nb\n", ["a", "b"]),  # a byte order mark is not text
        (b"a\r\nb\r\n", ["a\r", "b\r"]),  # CR is stripped later by normalize
    ],
)
def test_lines_are_counted_like_wc_plus_an_unterminated_last_one(
    tmp_path: Path, content: bytes, lines: list[str]
) -> None:
    path = write(tmp_path / "f.txt", content)
    assert count_lines(SplitFiles(path, path)) == len(lines)
    assert [line.decode().removesuffix("\n") for line in raw_lines(path, size=1)] == lines


def raw_lines(path: Path, size: int = 3) -> list[bytes]:
    with open(path, "rb") as handle:
        return [line for chunk in line_chunks(handle, size) for line in chunk]


def test_crlf_and_no_trailing_newline_read_cleanly(tmp_path: Path) -> None:
    files = write_pair(tmp_path, "train", b"a b\r\nc\r\n", b"x\r\ny")
    text = read_files(files, "train")
    assert (text.src, text.tgt) == (["a b", "c"], ["x", "y"])


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    files = write_pair(tmp_path, "train", b"gut\nschl\xe9cht\nok\n", b"good\nbad\nok\n")
    message = error_of(read_files, files, "train")
    assert f"{files.src} line 2 is not valid UTF-8" in message and "skip_bad_lines" in message


def test_skip_bad_lines_drops_the_pair_and_keeps_the_alignment(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = write_pair(tmp_path, "train", b"eins\nzwei\ndrei\n", b"\xef\xbb\xbfone\n\xff two\nthree\n")
    with caplog.at_level(logging.WARNING, logger="nmt.data.corpus"):
        text = read_files(files, "train", skip_bad_lines=True)
    assert (text.src, text.tgt) == (["eins", "drei"], ["one", "three"])  # BOM gone on the slow path too
    assert "skipped 1 lines that are not valid UTF-8" in caplog.text
    assert decode_lines(raw_lines(files.tgt), "tgt", 1, skip_bad_lines=True) == (["one", "", "three"], [2])


def test_skip_bad_lines_through_the_data_config(tmp_path: Path) -> None:
    write_pair(tmp_path, "train", b"a\n\xc3\n", b"x\ny\n")
    with pytest.raises(UserError, match="line 2"):
        read_split(DataConfig(dir=str(tmp_path)), "train")
    assert read_split(DataConfig(dir=str(tmp_path), skip_bad_lines=True), "train").tgt == ["x"]


def test_tsv_corpus(tmp_path: Path) -> None:
    path = write(tmp_path / "train.tsv", "ein  Haus\ta house\r\nleer\t\n\n\tnur Ziel\nzwei\ttwo\tnote\n")
    text = read_files(SplitFiles(path, None), "train")
    assert text.src == ["ein Haus", "zwei"]  # pairs with an empty side dropped; extra columns ignored
    assert text.tgt == ["a house", "two"]


def test_tsv_line_without_a_tab_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "train.tsv", "a\tb\nno tab here\n")
    message = error_of(read_files, SplitFiles(path, None), "train")
    assert f"{path} line 2 has no tab" in message


def test_a_split_without_any_pair_is_an_error(tmp_path: Path) -> None:
    files = write_pair(tmp_path, "train", "a\n\n", "\nb\n")
    assert "holds no sentence pairs" in error_of(read_files, files, "train")


def test_synthetic_corpus_reads_back_as_a_reordering_task(tmp_path: Path) -> None:
    write_reordering_corpus(tmp_path, train=20, valid=3, test=4, vocab=12, min_len=2, max_len=5)
    cfg = DataConfig(dir=str(tmp_path), src_lang="src", tgt_lang="tgt")
    train = read_split(cfg, "train")
    assert (len(train), len(read_split(cfg, "valid")), len(read_split(cfg, "test"))) == (20, 3, 4)
    for src, tgt in zip(train.src, train.tgt, strict=True):
        words = src.split()
        assert 2 <= len(words) <= 5
        assert tgt.split() == [word.upper()[::-1] for word in reversed(words)]
    assert reordering_pairs(20, 12, 2, 5, seed=1000) == (train.src, train.tgt)  # split seed = seed * 1000


def test_synthetic_vocabulary_larger_than_the_syllables_allow_is_an_error() -> None:
    assert len(set(" ".join(reordering_pairs(2000, 4352, 1, 1, seed=0)[0]).split())) > 1000
    with pytest.raises(ValueError, match="vocab=4353"):  # it used to loop forever
        reordering_pairs(1, 4353, 1, 1, seed=0)


@pytest.mark.parametrize("block", [1, 2, 5, 1 << 24])
def test_checks_find_the_line_whatever_the_blocks(
    block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checking pass reads blocks of bytes: lines and characters cut at a block's end still count once."""
    monkeypatch.setattr("nmt.data.corpus._BLOCK", block)
    files = write_pair(tmp_path, "train", "grün\nrot blau\n\nende", "green\nred blue\nx\nend\n")
    assert count_lines(files) == 4
    write(files.src, "grün\nrot\n".encode() + b"\xe9\n")
    write(files.tgt, "a\nb\nc\n")
    assert f"{files.src} line 3 is not valid UTF-8" in error_of(count_lines, files)
    assert count_lines(files, skip_bad_lines=True) == 3


def test_chunks_read_like_the_whole(tmp_path: Path) -> None:
    """Streaming a split in chunks of any size gives the pairs, drops and counts of reading it whole."""
    src = "\ufeffeins\n\nzwei  drei\n \nvier\nf\xfcnf\r\n"
    files = write_pair(tmp_path, "train", src.encode(), b"one\ntwo\n\t\n\nfour\nfive")
    whole = read_files(files, "train")
    for size in (1, 2, 4, 100):
        chunks = list(pair_chunks(files, size=size))
        assert [s for c in chunks for s in c.src] == whole.src == ["eins", "vier", "f\xfcnf"]
        assert [t for c in chunks for t in c.tgt] == whole.tgt == ["one", "four", "five"]
        assert sum(c.lines for c in chunks) == 6 and all(len(c.src) == len(c.tgt) for c in chunks)


# --- through `nmt train`: one line for each bad corpus, every dropped line counted ----------------------


def _bad_corpus(kind: str, corpus: Path, tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """A corpus directory with one problem, the extra CLI flags and the fragments the error must name."""
    data = copy_corpus(corpus, tmp_path / "data")
    train_src, train_tgt = data / "train.src", data / "train.tgt"
    if kind == "missing directory":
        return tmp_path / "nowhere", [], [str(tmp_path / "nowhere"), "does not exist", "--data"]
    if kind == "directory is a file":
        return train_src, [], [str(train_src), "is a file"]
    if kind == "missing file":
        train_tgt.unlink()
        return data, [], [str(train_tgt), "does not exist", "--tgt-lang"]
    if kind == "language suffix without files":
        return data, ["--src-lang", "fr"], [str(data / "train.fr"), "does not exist", "--src-lang"]
    if kind == "unequal line counts":
        train_tgt.write_text("".join(train_tgt.read_text().splitlines(keepends=True)[:-2]))
        return data, [], [str(train_src), "300 lines", str(train_tgt), "298"]
    if kind == "invalid UTF-8":
        with open(train_src, "ab") as handle:
            handle.write(b"ka lo\nmi \xff\xfe su\n")
        with open(train_tgt, "a") as handle:
            handle.write("OK\nBAD\n")
        return data, [], [str(train_src), "line 302", "not valid UTF-8", "data.skip_bad_lines=true"]
    if kind == "no pairs at all":
        train_src.write_text("\n  \n")
        train_tgt.write_text("a\nb\n")
        return data, [], [str(train_src), "holds no sentence pairs"]
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "missing directory",
        "directory is a file",
        "missing file",
        "language suffix without files",
        "unequal line counts",
        "invalid UTF-8",
        "no pairs at all",
    ],
)
def test_bad_corpus_is_one_line(kind: str, corpus: Path, tiny: Path, tmp_path: Path) -> None:
    data, flags, fragments = _bad_corpus(kind, corpus, tmp_path)
    assert_one_line_error(run_cli(*train_args(tiny, data, tmp_path / "run", *flags)), *fragments)
    assert not (tmp_path / "run").exists()  # a refused run leaves no directory behind


@pytest.mark.parametrize(
    ("append_src", "append_tgt", "flags", "warning"),
    [
        (b"\n   \nka lo\n\t\xc2\xa0\n", "A\nB\n\nC\n", [], "dropped 4 of 304 pairs with an empty side"),
        (b"ka \xff lo\nmi su\n", "X\nY\n", ["--set", "data.skip_bad_lines=true"], "skipped 1 lines"),
    ],
    ids=["empty and whitespace lines", "invalid UTF-8 skipped"],
)
def test_dropped_training_lines_are_counted(
    append_src: bytes,
    append_tgt: str,
    flags: list[str],
    warning: str,
    corpus: Path,
    tiny: Path,
    tmp_path: Path,
) -> None:
    data = copy_corpus(corpus, tmp_path / "data")
    with open(data / "train.src", "ab") as handle:
        handle.write(append_src)
    with open(data / "train.tgt", "a") as handle:
        handle.write(append_tgt)
    code, _, err = run_cli(*train_args(tiny, data, tmp_path / "run", "--max-steps", "1", *NO_REPORT, *flags))
    assert code == 0, err
    assert warning in err
