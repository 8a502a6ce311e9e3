"""`nmt export --to ctranslate2` and `nmt translate --engine ctranslate2`: CTranslate2's greedy output equals
ours token for token (both through the Translator), with the same attention and alignments, but where torch's
own scores tie (tests/ties.py); what cannot be exported is refused in one line."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from nmt.align.pharaoh import parse_links
from nmt.align.reading import SEARCH_READING
from nmt.decode.aligner import teacher_forced
from nmt.decode.exported import META, VOCABULARY_MAP, load_export
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import MULTILINGUAL_DIRECTIONS, assert_one_line_error, run_cli, train_args
from tests.ties import assert_equal_but_for_ties

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.slow  # exports and a second training: the end-to-end layer


def greedy_both(
    run_dir: Path, export_dir: Path, sentences: list[str], alignments: bool = False
) -> tuple[list[Hypothesis], list[int]]:
    """Greedy hypotheses of `sentences` (with their alignments when asked) from our search, batched as `nmt
    translate` batches them, after checking that the export's CTranslate2 translator gives the same but at
    near ties of torch's scores; and the indices of the sentences where the two differ."""
    exported = load_export(export_dir, "cpu").with_search(beam_size=1, nbest=1)
    which = json.loads((export_dir / META).read_text())["checkpoint"]
    translator = TorchTranslator.of_run(load_run(run_dir, torch.device("cpu"), which))
    translator = translator.with_search(beam_size=1, nbest=1)
    sources = translator.encode(sentences)
    assert exported.encode(sentences) == sources
    ours = [hyps[0] for hyps in translator.search(sources, alignments=alignments)]
    theirs = [hyps[0] for hyps in exported.search(sources, alignments=alignments)]
    reading = translator.reading or SEARCH_READING  # the attention the run's links read
    return ours, assert_equal_but_for_ties(translator.model, sources, ours, theirs, reading=reading)


def assert_same_lines_but(differ: list[int], torch_out: str, ct2_out: str, lines: int) -> None:
    """`nmt translate`'s output lines from both engines are the same but on the sentences in `differ`."""
    ours, theirs = torch_out.splitlines(), ct2_out.splitlines()
    assert len(ours) == len(theirs) == lines
    assert [line for i, line in enumerate(ours) if i not in differ] == [
        line for i, line in enumerate(theirs) if i not in differ
    ]


def test_greedy_translations_equal_ours(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "ct2"
    code, stdout, err = run_cli("export", str(trained_run), "--to", "ctranslate2", str(out))
    assert code == 0, err
    assert stdout.strip() == str(out)
    assert {"model.bin", "shared_vocabulary.json", "spm.model", META} <= {p.name for p in out.iterdir()}
    sentences = (corpus / "test.src").read_text().splitlines()
    ours, differ = greedy_both(trained_run, out, sentences)
    assert sum(len(h.tokens) for h in ours) > len(sentences)
    test_src = str(corpus / "test.src")
    torch_out = run_cli("translate", str(trained_run), "-i", test_src, "--beam-size", "1", "--device", "cpu")
    ct2_out = run_cli("translate", str(out), "--engine", "ctranslate2", "-i", test_src, "--beam-size", "1")
    assert torch_out[0] == ct2_out[0] == 0, ct2_out[2]
    assert_same_lines_but(differ, torch_out[1], ct2_out[1], len(sentences))


def test_an_export_gives_nbest_lists_scores_and_jsonl(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """`nmt translate EXPORT_DIR` (no --engine: the export is recognised) with --nbest, --scores and
    --format jsonl, as the torch engine writes them; the scores are CTranslate2's, best first."""
    out = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(out))[0] == 0
    test_src = str(corpus / "test.src")
    code, moses, err = run_cli("translate", str(out), "-i", test_src, "--beam-size", "4", "--nbest", "3")
    assert code == 0, err
    rows = [line.split(" ||| ") for line in moses.splitlines()]
    assert [int(i) for i, _, _ in rows] == [i for i in range(100) for _ in range(3)]
    scores = [[float(score) for i, _, score in rows if int(i) == line] for line in range(100)]
    assert all(line == sorted(line, reverse=True) for line in scores)
    code, jsonl, err = run_cli("translate", str(out), "-i", test_src, "--beam-size", "4", "--format", "jsonl")
    assert code == 0, err
    best = [json.loads(line)["hypotheses"][0] for line in jsonl.splitlines()]
    assert [(b["text"], b["score"]) for b in best] == [(text, float(score)) for _, text, score in rows[::3]]
    code, greedy, err = run_cli("translate", str(out), "-i", test_src, "--beam-size", "1", "--scores")
    assert code == 0 and len(greedy.splitlines()) == 100, err
    result = run_cli("translate", str(out), "--engine", "torch", input="ka lo\n")
    assert_one_line_error(result, "is a CTranslate2 export", "without --engine torch")
    sentences = (corpus / "test.src").read_text().splitlines()[:10]
    exported = load_export(out, "cpu").with_search(beam_size=1)
    summed = exported.with_search(length_penalty=0.0)
    sources = exported.encode(sentences)
    for (plain,), (normalised,) in zip(summed.search(sources), exported.search(sources), strict=True):
        assert normalised.tokens == plain.tokens
        assert normalised.score * (len(plain.tokens) + 1) == pytest.approx(plain.score, rel=1e-4)


def test_an_export_samples_with_a_seed(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(out))[0] == 0
    test_src = str(corpus / "test.src")
    args = ["translate", str(out), "-i", test_src, "--sampling", "--nbest", "2", "--temperature", "3.0"]
    code, first, err = run_cli(*args, "--seed", "3")
    assert code == 0, err
    assert len(first.splitlines()) == 200
    assert run_cli(*args, "--seed", "3")[1] == first != run_cli(*args, "--seed", "4")[1]
    greedy = run_cli("translate", str(out), "-i", test_src, "--beam-size", "1")[1]
    assert run_cli("translate", str(out), "-i", test_src, "--sampling", "--top-k", "1")[1] == greedy


def test_post_norm_untied_separate_vocabularies(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    """Post-norm (no final norms), an output projection of its own, source and target sentencepiece models."""
    run_dir, out = tmp_path / "run", tmp_path / "ct2"
    settings = ["model.transformer.norm=post", "model.tie_embeddings=false", "tokenizer.joint=false"]
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "30", *(f"--set={s}" for s in settings))
    assert run_cli(*args)[0] == 0
    assert run_cli("export", str(run_dir), str(out), "--checkpoint", "last")[0] == 0
    assert {"source_vocabulary.json", "spm.src.model", "spm.tgt.model"} <= {p.name for p in out.iterdir()}
    greedy_both(run_dir, out, (small_corpus / "valid.src").read_text().splitlines()[:50])


def test_int8_export_translates(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "int8"
    assert run_cli("export", str(trained_run), str(out), "--quantization", "int8")[0] == 0
    sentences = (corpus / "test.src").read_text().splitlines()[:20]
    translations = load_export(out, "cpu").with_search(beam_size=5).translate(["", *sentences])
    assert translations[0] == "" and all(translations[1:])


def test_rnn_run_is_refused(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "rnn"
    rnn = ["--set", "model.type=rnn-bahdanau", "--set", "model.transformer="]  # tiny's section dropped
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "2", *rnn)
    assert run_cli(*args)[0] == 0
    result = run_cli("export", str(run_dir), str(tmp_path / "out"))
    assert_one_line_error(result, "model.type=rnn-bahdanau", "only Transformers")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(["--quantization", "int4"], "--quantization int4"), (["--to", "onnx"], "--to onnx")],
)
def test_bad_names_are_refused(trained_run: Path, tmp_path: Path, flags: list[str], fragment: str) -> None:
    assert_one_line_error(run_cli("export", str(trained_run), str(tmp_path / "out"), *flags), fragment)


def test_nonempty_out_dir_is_refused(trained_run: Path, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert_one_line_error(run_cli("export", str(trained_run), str(tmp_path)), "not an empty directory")


def test_engine_needs_an_export(trained_run: Path) -> None:
    result = run_cli("translate", str(trained_run), "--engine", "ctranslate2", input="ka lo\n")
    assert_one_line_error(result, "not a directory written by `nmt export`")


def test_alignments_are_the_same_from_both_engines(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    """The export's attention is the one the run aligns with (its penultimate layer's mean of heads), so
    greedy translations with --alignments are the same lines from CTranslate2 as from torch but where torch's
    scores tie (tests/ties.py), and CTranslate2 returns that attention of torch's producing its output; an
    export written before that is refused in one line."""
    out = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(out))[0] == 0
    args = ["-i", str(corpus / "test.src"), "--beam-size", "1", "--alignments"]
    torch_out = run_cli("translate", str(trained_run), *args, "--device", "cpu")
    ct2_out = run_cli("translate", str(out), *args)
    assert torch_out[0] == ct2_out[0] == 0, ct2_out[2]
    lines = (corpus / "test.src").read_text().splitlines()
    _, differ = greedy_both(trained_run, out, lines, alignments=True)
    assert_same_lines_but(differ, torch_out[1], ct2_out[1], len(lines))
    assert all(line.split(" ||| ")[1] for line in ct2_out[1].splitlines())

    exported = load_export(out, "cpu")
    ours = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    for ids in ours.encode(lines[:10]):
        (result,) = exported.translator.translate_batch(
            [exported.tokenizers.src.pieces(ids)], beam_size=1, return_attention=True
        )
        tokens = [exported.tokenizers.tgt.sp.piece_to_id(piece) for piece in result.hypotheses[0]]
        (paid,) = teacher_forced(ours, [ids], [tokens])  # (layers, heads, output + eos, source + eos)
        theirs = torch.tensor(result.attention[0])  # a row per output token, a column per source token
        paid = paid[0].mean(dim=0)[:-1, :-1]  # the penultimate (first) layer's mean of heads, eos left out
        torch.testing.assert_close(theirs, paid, atol=1e-5, rtol=1e-4)

    meta = json.loads((out / META).read_text())
    del meta["alignment"]
    (out / META).write_text(json.dumps(meta))
    assert_one_line_error(
        run_cli("translate", str(out), *args), "returns no alignments", "export the run again"
    )


@pytest.mark.parametrize(
    ("fixture", "tags"), [("multilingual_run", "encoder"), ("decoder_tag_run", "decoder")]
)
def test_a_multilingual_export_translates_every_direction_as_the_run(
    fixture: str, tags: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The export knows the run's directions and tags: the same source ids (an encoder tag first) and the
    same greedy outputs and alignments (a decoder tag forced as CTranslate2's target_prefix: no output token
    and no attention row; an encoder tag aligned to by no output token) into every target, but where the
    10-update model's scores tie (tests/ties.py); `--alignments` links every output word."""
    run_dir: Path = request.getfixturevalue(fixture)
    out = tmp_path / "ct2"
    assert run_cli("export", str(run_dir), str(out))[0] == 0
    meta = json.loads((out / META).read_text())
    assert (meta["directions"], meta["tags"]) == (MULTILINGUAL_DIRECTIONS, tags)
    exported = load_export(out, "cpu").with_search(beam_size=1, nbest=1)
    translator = TorchTranslator.of_run(load_run(run_dir, torch.device("cpu"))).with_search(beam_size=1)
    language_tags = translator.tags
    assert language_tags is not None
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        lines = (run_dir.parent / "data" / f"test.{src}").read_text().splitlines()
        ours, theirs = translator.toward(tgt), exported.toward(tgt)
        sources = ours.encode(lines)
        assert theirs.encode(lines) == sources
        found = [h[0] for h in ours.search(sources, alignments=True)]
        other = [h[0] for h in theirs.search(sources, alignments=True)]
        prefix = language_tags.forced_prefix(tgt)
        assert_equal_but_for_ties(translator.model, sources, found, other, prefix)
        assert not {token for h in found + other for token in h.tokens} & set(language_tags.banned)
        attended = {ids[p] for ids, h in zip(sources, other, strict=True) for p in h.alignment or []}
        assert attended and not attended & set(language_tags.banned)
        flags = ["--src-lang", src, "--tgt-lang", tgt, "--alignments"]
        code, out_text, err = run_cli("translate", str(out), *flags, input="\n".join(lines) + "\n")
        assert code == 0, err
        for line in out_text.splitlines():
            text, links = line.split(" ||| ")
            assert {j for _, j in parse_links(links, line).possible} == set(range(len(text.split()))), line


def test_an_export_with_decoder_tags_has_no_target_language_vocabulary(
    decoder_tag_run: Path, tmp_path: Path
) -> None:
    """With decoder tags the export carries no target-language vocabulary (no vocabulary map can follow a
    decoder tag): zero-shot (where search uses one by default) says so and translates as with it off; asking
    for one in a trained direction is one line naming the option that turns it off."""
    out = tmp_path / "ct2"
    assert run_cli("export", str(decoder_tag_run), str(out))[0] == 0
    assert not (out / VOCABULARY_MAP).exists()
    flags = ["translate", str(out), "--src-lang", "xb", "--tgt-lang", "xc", "--zero-shot"]
    code, out_default, err = run_cli(*flags, input="a b\n")
    assert code == 0 and "has no vocabulary of xc" in err
    assert run_cli(*flags, "--no-zero-shot-vocabulary", input="a b\n")[:2] == (0, out_default)
    trained = ["translate", str(out), "--src-lang", "xa", "--tgt-lang", "xc", "--target-vocabulary"]
    result = run_cli(*trained, input="a b\n")
    assert_one_line_error(result, "the ctranslate2 engine has no vocabulary of xc", "--no-target-vocabulary")


def test_an_export_with_encoder_tags_holds_zero_shot_output_to_the_vocabulary_map(
    multilingual_run: Path, tmp_path: Path
) -> None:
    """With encoder tags the vocabularies travel as CTranslate2's vocabulary map, a line per tag. CTranslate2
    pads a candidate set to a multiple of 16 with the lowest ids it lacks, so a vocabulary of 48 pieces is
    held to exactly: its zero-shot outputs are nmt's own engine's (but for ties), every piece in it."""
    run = tmp_path / "run"
    shutil.copytree(multilingual_run, run)
    vocabularies = json.loads((run / "target_vocabulary.json").read_text())
    vocabularies["xc"] = vocabularies["xc"][:48]  # the specials, the shared pieces, then xc's own
    (run / "target_vocabulary.json").write_text(json.dumps(vocabularies))
    out = tmp_path / "ct2"
    assert run_cli("export", str(run), str(out))[0] == 0
    lines = dict(line.split("\t") for line in (out / VOCABULARY_MAP).read_text().splitlines())
    tokenizer = load_run(run, torch.device("cpu")).tokenizers.tgt
    assert sorted(lines) == [">>xa<<", ">>xb<<", ">>xc<<"]
    assert tokenizer.ids(lines[">>xc<<"].split()) == vocabularies["xc"]
    greedy = {"beam_size": 1, "min_length": 3}  # a 10-update model may end at once
    run_model = load_run(run, torch.device("cpu"))
    ours = TorchTranslator.of_run(run_model).toward("xc", "xb", zero_shot=True).with_search(**greedy)
    theirs = load_export(out, "cpu").toward("xc", "xb", zero_shot=True).with_search(**greedy)
    sources = ours.encode((multilingual_run.parent / "data" / "test.xb").read_text().splitlines())
    found = [hyps[0] for hyps in ours.search(sources)]
    other = [hyps[0] for hyps in theirs.search(sources)]
    assert_equal_but_for_ties(ours.model, sources, found, other, [])
    assert {token for h in other for token in h.tokens} <= set(vocabularies["xc"])
    unheld = [h[0].tokens for h in theirs.with_search(zero_shot_vocabulary=False).search(sources)]
    assert unheld != [h.tokens for h in other]  # the map changed what CTranslate2 writes


def test_the_search_parts_ctranslate2_has_knobs_for_are_mapped_and_the_others_refused(
    trained_run: Path, corpus: Path, tmp_path: Path
) -> None:
    """n-gram blocking and a minimum length reach CTranslate2 as its own knobs (its greedy outputs are then
    ours, but for ties); diverse beam search, which it has no knob for, is refused in one line."""
    out = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(out))[0] == 0
    ours = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    theirs = load_export(out, "cpu")
    sources = ours.encode((corpus / "test.src").read_text().splitlines()[:60])
    for setting in ({"no_repeat_ngram_size": 1}, {"min_length": 12}):
        mine, exported = (t.with_search(beam_size=1, **setting) for t in (ours, theirs))
        found = exported.search(sources)
        assert_equal_but_for_ties(
            ours.model, sources, [h[0] for h in mine.search(sources)], [h[0] for h in found]
        )
        if "min_length" in setting:
            assert all(len(h[0].tokens) >= 12 for h in found)
        else:
            assert all(len(set(h[0].tokens)) == len(h[0].tokens) for h in found)
    refused = run_cli("translate", str(out), "--diverse-groups", "2", "--beam-size", "4", input="ka lo\n")
    assert_one_line_error(
        refused, "the ctranslate2 engine (an export) has no DiverseBeamSearch search", "use the run directory"
    )


def test_a_run_with_a_residual_free_encoder_layer_trains_translates_and_is_refused(
    tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "residual-free"
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "30")
    assert run_cli(*args, "--set", "model.transformer.residual_free_layer=0")[0] == 0
    losses = [
        json.loads(line)["loss"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "train"
    ]
    assert losses[-1] < losses[0]
    code, out, err = run_cli("translate", str(run_dir), "--device", "cpu", input="a b c\n")
    assert out.strip()
    assert code == 0, err
    for to in ("ctranslate2", "huggingface"):
        result = run_cli("export", str(run_dir), str(tmp_path / to), "--to", to)
        assert_one_line_error(result, "encoder layer 0 has no residual connection", "cannot be exported")
