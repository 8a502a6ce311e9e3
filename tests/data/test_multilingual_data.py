"""A multilingual run's data: its files checked, a balanced tokenizer sample, every direction's tagged pairs
in one cached corpus, each epoch's draws by weight and temperature."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from nmt.config.multilingual import Direction
from nmt.config.schema import Config
from nmt.config.sections import TokenizerConfig
from nmt.config.yaml_file import load_config
from nmt.data.arrays import EncodedCorpus
from nmt.data.batching import token_budget_groups
from nmt.data.directions import direction_draws, epoch_examples
from nmt.data.prepare import PreparedData, prepare_data
from nmt.data.sample import write_sample
from nmt.data.splits import language_split, read_directions
from nmt.errors import UserError
from tests.synthetic import multilingual_sentences, write_multilingual_corpus

DIRECTIONS = "[xa-xb, xb-xa, xa-xc, xc-xa]"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_multilingual_corpus(tmp_path / "data", train=300, valid=20, test=20, vocab=40)


def config(data: Path, *overrides: str) -> Config:
    settings = [f"data.dir={data}", f"data.multilingual.directions={DIRECTIONS}", "tokenizer.vocab_size=200"]
    return load_config(None, [*settings, *overrides])


def prepare(cfg: Config, tmp_path: Path, run: str = "run") -> PreparedData:
    (tmp_path / run).mkdir(exist_ok=True)
    return prepare_data(cfg, tmp_path / run, reuse_tokenizers=False, cache=tmp_path / "cache")


def test_every_direction_is_in_one_corpus_with_its_target_tag_first(data: Path, tmp_path: Path) -> None:
    prepared = prepare(config(data, "data.multilingual.tags=encoder"), tmp_path)
    tokenizer, directions = prepared.tokenizers.src, prepared.directions
    assert prepared.tokenizers.joint and directions is not None
    assert directions.train_pairs == (300, 300, 300, 300) and directions.valid_pairs == (20, 20, 20, 20)
    tags = tokenizer.tag_ids
    starts = [0, 300, 600, 900]
    for direction, start in zip(directions.directions, starts, strict=True):
        source, target = prepared.train.src[start], prepared.train.tgt[start]
        assert source[0] == tags[direction.tgt] and not set(source[1:]) & set(tags.values())
        assert not set(target) & set(tags.values())  # encoder tags: the target is the text alone
    assert tokenizer.decode([list(prepared.train.src[0])]) == (data / "train.xa").read_text().splitlines()[:1]
    assert tokenizer.decode([list(prepared.train.tgt[0])]) == (data / "train.xb").read_text().splitlines()[:1]
    rows = directions.valid_rows()  # validation: the same layout, one direction after another
    assert [r.start for r in rows] == [0, 20, 40, 60]
    assert prepared.valid_ids.src[20][0] == tags["xa"] and prepared.valid.src[20] == prepared.valid.tgt[0]


def test_the_cache_key_covers_the_directions_not_the_draws(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Weights and temperature only change which rows each epoch draws: the encoded corpus is the same."""

    def cache_log(cfg: Config) -> str:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="nmt"):
            prepare(cfg, tmp_path)
        return " ".join(r.getMessage() for r in caplog.records if "cache" in r.getMessage())

    assert "encoded cache miss" in cache_log(config(data))
    weighted = config(data, "data.multilingual.weights={xa-xc: 3.0}", "data.multilingual.temperature=2.0")
    assert "encoded cache hit" in cache_log(weighted)
    fewer = config(data, "data.multilingual.directions=[xa-xb, xb-xa]")
    assert "tokenizer cache miss" in cache_log(fewer)  # another set of languages: other tags
    assert "encoded cache miss" in cache_log(config(data, "data.multilingual.directions=[xb-xa, xa-xb]"))


def test_a_language_without_files_is_one_error(data: Path, tmp_path: Path) -> None:
    (data / "train.xc").unlink()
    with pytest.raises(UserError, match=r"train\.xc does not exist .*; check the path and data\.multi"):
        prepare(config(data), tmp_path)
    with pytest.raises(UserError, match=r"no valid files in .*: expected valid\.L or val\.L or dev\.L"):
        language_split(config(data, "data.multilingual.directions=[yy-zz]").data, "valid")


def test_unequal_line_counts_across_languages_are_one_error(data: Path, tmp_path: Path) -> None:
    lines = (data / "train.xb").read_text().splitlines()
    (data / "train.xb").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(UserError, match=r"train\.xa has 300 lines but .*train\.xb has 299: .*line-aligned"):
        prepare(config(data), tmp_path)


def test_a_tsv_split_is_refused(data: Path, tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("a\tb\n")
    with pytest.raises(UserError, match=r"a run of several directions reads a file per language .* \.jsonl"):
        language_split(config(data, f"data.train={tmp_path / 'train.tsv'}").data, "train")


def write_jsonl(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_a_jsonl_corpus_need_not_be_aligned_across_languages(data: Path, tmp_path: Path) -> None:
    """Each line holds the languages it has; a direction takes the lines holding both of its own."""
    texts = {lang: (data / f"train.{lang}").read_text().splitlines() for lang in ("xa", "xb", "xc")}
    records = [{"xa": texts["xa"][i], "xb": texts["xb"][i]} for i in range(200)]
    records += [{"xc": texts["xc"][i], "xa": texts["xa"][i]} for i in range(200, 300)]
    records += [{}, {"xa": "", "xb": texts["xb"][0]}]  # nothing to pair; an empty side
    train = write_jsonl(tmp_path / "train.jsonl", records)
    prepared = prepare(config(data, f"data.train={train}"), tmp_path)
    assert prepared.directions is not None and prepared.directions.train_pairs == (200, 200, 100, 100)
    first_xc = prepared.train.src[400]  # xa-xc follows xa-xb and xb-xa
    assert prepared.tokenizers.src.decode([list(first_xc)]) == [texts["xa"][200]]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"xa": "kalo", "xb": "KALO"}', "not json"], r"train.jsonl line 2 is not JSON"),
        (['{"xa": "kalo", "xb": 3}'], r"line 1 is not an object of sentences"),
        (['["kalo", "KALO"]'], r"line 1 is not an object of sentences"),
        (['{"xa": "kalo", "xb": "KALO"}'], r"no line holds both xa and xc \(direction xa-xc\)"),
    ],
)
def test_bad_jsonl_lines_are_one_error(data: Path, tmp_path: Path, lines: list[str], expected: str) -> None:
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=expected):
        prepare(config(data, f"data.train={train}"), tmp_path)


def test_a_valid_split_of_every_direction(data: Path) -> None:
    texts = read_directions(config(data).data, "valid")
    assert list(texts) == [
        Direction("xa", "xb"),
        Direction("xb", "xa"),
        Direction("xa", "xc"),
        Direction("xc", "xa"),
    ]
    assert texts[Direction("xb", "xa")].src == texts[Direction("xa", "xb")].tgt


def test_the_tokenizer_sample_is_balanced_across_languages(tmp_path: Path) -> None:
    """A language with ten times the lines of another does not get ten times its sentences."""
    data = write_multilingual_corpus(tmp_path / "data", train=1000, valid=5, test=5, vocab=40)
    big = multilingual_sentences(10_000, 1, vocab=40, min_len=3, max_len=6, seed=5)[0]
    records = [{"xa": line} for line in big] + [{"xb": line.upper()} for line in big[:1000]]
    records += [{"xa": "x", "xb": "Y"}]
    train = write_jsonl(tmp_path / "train.jsonl", records)
    cfg = config(data, f"data.train={train}", "data.multilingual.directions=[xa-xb]")
    split = language_split(cfg.data, "train")
    counts = split.count(cfg.data.directions.directions, skip_bad_lines=False)
    assert counts.languages == {"xa": 10_001, "xb": 1001}
    sample = write_sample(split, counts, TokenizerConfig(max_sentences=1000), tmp_path)
    lines = [line for text in sample.languages.values() for line in text]
    assert sample.sentences == len(lines) == 1000
    assert sum(line.islower() for line in lines) == 500  # xa's lexicon is lower case, xb's upper case


def test_default_draws_are_every_pair_once() -> None:
    assert direction_draws([300, 100], [1.0, 1.0], 1.0) == [300, 100]


def test_weights_and_temperature_share_out_an_epoch() -> None:
    assert direction_draws([300, 100], [1.0, 3.0], 1.0) == [200, 200]
    assert direction_draws([900, 100], [1.0, 1.0], 1e9) == [500, 500]  # a high temperature: uniform
    assert direction_draws([400, 100], [1.0, 1.0], 2.0) == [333, 167]  # ∝ sqrt(pairs)
    assert direction_draws([400, 0], [1.0, 1.0], 2.0) == [400, 0]


def test_an_epoch_repeats_a_small_direction_and_draws_the_rest() -> None:
    rows = epoch_examples([300, 100], [200, 250], seed=7)
    first, second = rows[rows < 300], rows[rows >= 300]
    assert len(first) == 200 and len(np.unique(first)) == 200  # without replacement
    counts = np.bincount(second - 300, minlength=100)
    assert sorted(set(counts.tolist())) == [2, 3] and (counts == 3).sum() == 50  # twice whole, half again
    assert np.array_equal(rows, epoch_examples([300, 100], [200, 250], seed=7))  # the seed decides
    assert not np.array_equal(rows, epoch_examples([300, 100], [200, 250], seed=8))


def test_batches_of_an_epoch_hold_its_draws_exactly() -> None:
    corpus = EncodedCorpus.from_ids(
        [[5] * (1 + i % 7) for i in range(40)], [[6] * (1 + i % 5) for i in range(40)]
    )
    examples = np.array([0, 0, 0, 3, 3, 39, 12])
    groups = token_budget_groups(corpus, batch_tokens=30, seed=1, examples=examples)
    assert sorted(np.concatenate(groups).tolist()) == sorted(examples.tolist())
    everything = token_budget_groups(corpus, batch_tokens=30, seed=1)
    assert sorted(np.concatenate(everything).tolist()) == list(range(40))
