"""`nmt align`: a model's attention, teacher-forced on given targets, as word links: the merge of subwords
into words worked out by hand, a tiny model's links of given pairs (valid indices, no `</s>`), soft weights,
two directions symmetrized, and a one-line error for each bad input."""

import json
from pathlib import Path

import pytest
import torch

import nmt.decode.aligner
import nmt.decode.translator
from nmt.align.forced_attention import teacher_forced_attention
from nmt.align.pharaoh import read_links
from nmt.align.reading import Reading, default_reading
from nmt.align.symmetrize import symmetrize
from nmt.config.yaml_file import load_config
from nmt.data.batching import collate
from nmt.data.words import WordPieces
from nmt.decode.aligner import Forced, force, soft_text, teacher_forced
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.models.base import Wanted
from nmt.models.build import build_model
from nmt.models.config import ModelConfig, TransformerConfig
from tests.conftest import assert_one_line_error, run_cli, train_args

# One pair: source subwords s0 s1 s2 in words [0, 0, 1], target subwords t0 t1 t2 in words [0, 1, 1]. The
# attention has a row per target subword and one for eos, a column per source subword and one for eos.
HEAD_0 = [[0.6, 0.1, 0.1, 0.2], [0.1, 0.1, 0.7, 0.1], [0.1, 0.2, 0.1, 0.6], [0.1, 0.1, 0.1, 0.7]]
HEAD_1 = [[0.1, 0.1, 0.7, 0.1], [0.6, 0.1, 0.2, 0.1], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]]
FORCED = Forced(
    [WordPieces([10, 11, 12], [0, 0, 1], 2)],
    [WordPieces([20, 21, 22], [0, 1, 1], 2)],
    [torch.tensor([[HEAD_0, HEAD_1]])],  # (1 layer, 2 heads, 3 + 1 rows, 3 + 1 columns)
)


def test_each_reading_of_the_attention_gives_the_links_worked_out_by_hand() -> None:
    # head 0, argmax: t0 → s0 (word 0); t1 → s2 (word 1); t2 → s1, as eos's column (0.6) is dropped
    assert FORCED.links(Reading(0, (0,))) == [{(0, 0), (1, 1), (0, 1)}]
    # shift: t reads row t + 1; t2 reads the eos row, whose best source subword (eos dropped) is s0
    assert FORCED.links(Reading(0, (0,), "shift")) == [{(1, 0), (0, 1)}]
    assert FORCED.links(Reading(0, (1,))) == [{(1, 0), (0, 1), (1, 1)}]  # head 1: t0 → s2, t1 → s0, t2 → s2
    # the mean of both heads: t0 (0.35, 0.1, 0.4) → s2; t1 (0.35, 0.1, 0.45) → s2; t2 (0.1, 0.15, 0.4) → s2
    assert FORCED.links(Reading(-1, None)) == [{(1, 0), (1, 1)}]
    # a threshold: every weight of at least 0.5 off the eos row and column
    assert FORCED.links(Reading(0, (0,), threshold=0.5)) == [{(0, 0), (1, 1)}]


def test_soft_weights_sum_a_source_words_subwords_and_average_a_target_words() -> None:
    # head 0 without eos: t0 (0.6, 0.1 | 0.1), t1 (0.1, 0.1 | 0.7), t2 (0.1, 0.2 | 0.1); source words summed:
    # t0 (0.7, 0.1), t1 (0.2, 0.7), t2 (0.3, 0.1); target word 1 the mean of t1 and t2: (0.25, 0.4)
    assert soft_text(FORCED.soft(Reading(0, (0,)))) == "[[0.7, 0.1], [0.25, 0.4]]\n"


def test_a_guided_run_aligns_with_the_attention_it_was_trained_on(tiny: Path) -> None:
    three = ["model.decoder_layers=3", "model.transformer.heads=4"]
    guided = load_config(tiny, [*three, "train.alignment.links=train.links", "train.alignment.heads=2"])
    assert default_reading(guided, None, None, "RUN") == Reading(1, (0, 1))  # penultimate
    assert default_reading(guided, -1, "mean", "RUN") == Reading(-1, None)
    plain = load_config(tiny, three)
    assert default_reading(plain, None, None, "RUN") == Reading(1, None)  # the penultimate layer, measured
    assert default_reading(plain, 0, (3,), "RUN") == Reading(0, (3,))
    shifted = load_config(tiny, [*three, "train.alignment.links=train.links", "train.alignment.shift=true"])
    assert default_reading(shifted, None, None, "RUN") == Reading(1, (0,), "shift")  # the row it trained
    null = load_config(tiny, [*three, "train.alignment.links=train.links", "train.alignment.null_slot=true"])
    assert default_reading(null, None, None, "RUN") == Reading(1, (0,), null=True)  # the slot it trained


@pytest.fixture(scope="module")
def pairs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """20 test pairs and one of made-up words (several subwords each), in two files."""
    folder = tmp_path_factory.mktemp("pairs")
    src = [*(corpus / "test.src").read_text().splitlines()[:20], "kalomisute dosuvi"]
    tgt = [*(corpus / "test.tgt").read_text().splitlines()[:20], "mizuholo subemibe pamimi"]
    (folder / "src").write_text("".join(line + "\n" for line in src))
    (folder / "tgt").write_text("".join(line + "\n" for line in tgt))
    return folder / "src", folder / "tgt"


def word_counts(path: Path) -> list[int]:
    return [len(line.split()) for line in path.read_text().splitlines()]


def test_a_model_links_the_words_of_each_given_pair(
    trained_run: Path, pairs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, tgt = pairs
    code, out, err = run_cli(
        "align", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--device", "cpu"
    )
    assert code == 0, err
    (tmp_path / "links").write_text(out)
    found = read_links(tmp_path / "links")
    assert len(found) == 21
    for line, s, t in zip(found, word_counts(src), word_counts(tgt), strict=True):
        assert line.possible  # every target word has a source word, none of them eos
        assert all(i < s and j < t for i, j in line.possible), (line, s, t)
        assert {j for _, j in line.possible} == set(range(t))  # argmax: each target word links
    # the merge: the made-up words are several subwords each, and the links are words of the given text
    run = load_run(trained_run, torch.device("cpu"))
    translator = TorchTranslator.of_run(run)
    (made_up,) = translator.encode_words(["kalomisute dosuvi"], "source")
    assert len(made_up.ids) > made_up.count == 2
    lines = src.read_text().splitlines(), tgt.read_text().splitlines()
    expected = force(run, *lines).links(Reading(0, None))  # the default: the penultimate layer, mean of heads
    assert [set(line.possible) for line in found] == expected
    null = run_cli("align", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--null-slot")
    assert null[0] == 0, null[2]
    expected_null = force(run, *lines).links(Reading(0, None, null=True))
    (tmp_path / "null").write_text(null[1])
    assert [set(line.possible) for line in read_links(tmp_path / "null")] == expected_null
    assert all(n <= e for n, e in zip(expected_null, expected, strict=True))  # the null slot only drops links
    monkeypatch.setattr(nmt.decode.aligner, "CHUNK_PAIRS", 4)  # pairs forced a few at a time: the same links
    assert run_cli("align", str(trained_run), "--src", str(src), "--tgt", str(tgt)) == (0, out, "")


def test_soft_output_has_a_row_per_target_word_and_a_weight_per_source_word(
    trained_run: Path, pairs: tuple[Path, Path]
) -> None:
    src, tgt = pairs
    args = ["align", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--soft", "--layer", "0"]
    code, out, err = run_cli(*args, "--head", "1,2")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [len(weights) for weights in rows] == word_counts(tgt)
    for weights, s in zip(rows, word_counts(src), strict=True):
        assert all(len(row) == s for row in weights)
        assert all(0.0 <= sum(row) <= 1.001 for row in weights)  # eos's share left out; rounded
    assert sum(sum(map(sum, weights)) for weights in rows) > 0


@pytest.fixture(scope="module")
def reverse_run(tiny: Path, small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of the other direction (target → source), trained for a few updates."""
    out = tmp_path_factory.mktemp("runs") / "reverse"
    swapped = ["--src-lang", "tgt", "--tgt-lang", "src", "--max-steps", "10"]
    code, _, err = run_cli(
        *train_args(tiny, small_corpus, out, *swapped, "--set", "train.final_report=false")
    )
    assert code == 0, err
    return out


def test_two_directions_are_symmetrized(
    trained_run: Path, reverse_run: Path, pairs: tuple[Path, Path], tmp_path: Path
) -> None:
    src, tgt = pairs
    forward = run_cli("align", str(trained_run), "--src", str(src), "--tgt", str(tgt))[1]
    backward = run_cli("align", str(reverse_run), "--src", str(tgt), "--tgt", str(src))[1]
    (tmp_path / "f").write_text(forward)
    (tmp_path / "r").write_text(backward)
    f, r = read_links(tmp_path / "f"), read_links(tmp_path / "r", reverse=True)
    for method in ("intersection", "union", "grow-diag"):
        args = ["align", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--reverse-run"]
        code, out, err = run_cli(
            *args, str(reverse_run), "--symmetrize", method, "-o", str(tmp_path / method)
        )
        assert code == 0 and out == "", err
        found = [set(line.possible) for line in read_links(tmp_path / method)]
        assert found == [symmetrize(a.possible, b.possible, method) for a, b in zip(f, r, strict=True)]
    assert any(read_links(tmp_path / "union")[k].possible != f[k].possible for k in range(len(f)))


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--layer", "2"], ["--layer 2", "2 decoder layer(s)"]),
        (["--layer", "-3"], ["--layer -3"]),
        (["--head", "4"], ["--head 4", "4 head(s)"]),
        (["--head", "first"], ["--head first", "mean"]),
        (["--rule", "diagonal"], ["--rule diagonal", "argmax or shift"]),
        (["--threshold", "1.5"], ["--threshold 1.5", "at most 1"]),
        (["--symmetrize", "union"], ["--reverse-run"]),
    ],
)
def test_bad_options_are_one_line_errors(
    trained_run: Path, pairs: tuple[Path, Path], extra: list[str], fragments: list[str]
) -> None:
    src, tgt = pairs
    result = run_cli("align", str(trained_run), "--src", str(src), "--tgt", str(tgt), *extra)
    assert_one_line_error(result, *fragments)


def test_a_reverse_run_of_the_same_direction_or_with_soft_output_is_refused(
    trained_run: Path, reverse_run: Path, pairs: tuple[Path, Path]
) -> None:
    src, tgt = pairs
    args = ["align", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--reverse-run"]
    assert_one_line_error(
        run_cli(*args, str(trained_run)), "translates src → tgt", "must translate tgt → src"
    )
    assert_one_line_error(run_cli(*args, str(reverse_run), "--soft"), "--soft", "--reverse-run")


def test_files_that_do_not_pair_up_are_one_line_errors(trained_run: Path, tmp_path: Path) -> None:
    src, tgt = tmp_path / "src", tmp_path / "tgt"
    args = ["align", str(trained_run), "--src", str(src), "--tgt", str(tgt)]
    src.write_text("kalo mi\nsu te\n")
    tgt.write_text("mizu\n")
    assert_one_line_error(run_cli(*args), f"{src} has 2 lines but {tgt} has 1")
    tgt.write_text("mizu\n\n")
    assert_one_line_error(run_cli(*args), f"{tgt} line 2 is empty but {src} line 2 is not")
    src.write_text("kalo mi\n \n")
    code, out, err = run_cli(*args)  # a pair empty on both sides: a line without links
    assert code == 0 and out.split("\n")[1:] == ["", ""], err
    assert_one_line_error(run_cli(*args[:-1], str(tmp_path / "missing")), "cannot read", "missing")


def test_a_pair_longer_than_the_models_positions_is_named(
    trained_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = load_run(trained_run, torch.device("cpu")).cfg.model.position_limit
    assert limit is not None
    src, tgt = tmp_path / "src", tmp_path / "tgt"
    src.write_text("kalo mi\nsu te\n" + "kalo " * limit + "\n")
    tgt.write_text("mizu\nholo\nmizu\n")
    monkeypatch.setattr(
        nmt.decode.aligner, "CHUNK_PAIRS", 2
    )  # the long pair is the first of the second chunk
    result = run_cli("align", str(trained_run), "--src", str(src), "--tgt", str(tgt))
    assert_one_line_error(result, "line 3 takes", f"more than the {limit}")


def test_the_layer_trained_with_full_context_attends_with_full_context() -> None:
    """Teacher forcing reads the attention guided alignment trained: with `full_context_layer` that layer's
    from the pass that sees the whole target, every other layer's as the plain pass has them."""
    model = build_model(
        ModelConfig(encoder_layers=1, decoder_layers=3, transformer=TransformerConfig(d_model=16, heads=2)),
        30,
        30,
        True,
        0,
    ).eval()
    torch.manual_seed(0)
    sources, outputs = [[5, 6, 7], [8, 9]], [[10, 11, 12, 13], [14]]
    plain = teacher_forced_attention(model, sources, outputs)
    guided = teacher_forced_attention(model, sources, outputs, full_context_layer=1)
    batch = collate(sources, outputs, [0, 1])
    with torch.inference_mode():
        full = model(
            batch.src, batch.src_mask, batch.tgt_in, Wanted(align_layer=1, full_context=True)
        ).alignment
    assert full is not None
    for i, (before, after) in enumerate(zip(plain, guided, strict=True)):
        rows, columns = before.shape[2:]
        torch.testing.assert_close(after[1], full[i, :, :rows, :columns])
        assert not torch.allclose(after[1], before[1])  # row t sees target tokens after t
        torch.testing.assert_close(after[[0, 2]], before[[0, 2]])


def test_alignments_are_computed_in_float32_where_decoding_runs_in_bf16(
    trained_run: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU decoding runs under bf16 autocast; the attention `nmt align` reads is computed in float32
    there too (bf16 moves argmax ties, and the documented AERs are float32's). Here CPU bf16 autocast stands
    in for the GPU's."""
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    lines = (
        (corpus / "test.src").read_text().splitlines()[:20],
        (corpus / "test.tgt").read_text().splitlines()[:20],
    )
    sources, targets = (
        [w.ids for w in translator.encode_words(text, side)]
        for text, side in zip(lines, ("source", "target"), strict=True)
    )
    expected = teacher_forced(translator, sources, targets)

    def gpu_autocast(device: torch.device, enabled: bool = True, cache: bool = True) -> object:
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled, cache_enabled=cache)

    monkeypatch.setattr(nmt.decode.translator, "autocast", gpu_autocast)
    with gpu_autocast(torch.device("cpu")):
        found = teacher_forced(translator, sources, targets)
    for weights, reference in zip(found, expected, strict=True):
        assert weights.dtype == torch.float32
        torch.testing.assert_close(weights, reference, rtol=0, atol=0)
