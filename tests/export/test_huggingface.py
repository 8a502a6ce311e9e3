"""`nmt export --to huggingface`: transformers' Pegasus (pre-norm) and Marian (post-norm) compute our logits
from the mapped weights, and a trained run's export, loaded with AutoModelForSeq2SeqLM and AutoTokenizer,
generates `nmt translate --beam-size 1`'s output token for token (but where our scores tie: tests/ties.py);
what cannot be exported is refused in one line."""

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from nmt.config.schema import Config
from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, PAD
from nmt.decode.exported import output_limit
from nmt.decode.running_text import CUT_MARK
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.errors import UserError
from nmt.export.huggingface import hf_model, import_transformers
from nmt.export.model_card import model_card
from nmt.models.config import ModelConfig, TransformerConfig
from nmt.models.transformer import TransformerSeq2Seq, sinusoidal_positions
from tests.conftest import assert_one_line_error, run_cli, train_args
from tests.ties import assert_equal_but_for_ties

transformers = pytest.importorskip("transformers")
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5
VOCAB = 40


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every load is from a local directory: the Hub is never asked."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def random_model(norm: str, tie: bool = True) -> tuple[TransformerSeq2Seq, Config]:
    """A tiny random model whose layer norms are not the identity (as after training)."""
    torch.manual_seed(0)
    arch = TransformerConfig(d_model=16, heads=4, ff_dim=32, norm=norm, max_positions=160)
    cfg = Config(model=ModelConfig(encoder_layers=2, decoder_layers=2, tie_embeddings=tie, transformer=arch))
    model = TransformerSeq2Seq(cfg.model, VOCAB, VOCAB, joint_vocab=True, pad=PAD).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.3)
    return model, cfg


def saved_and_loaded(model: TransformerSeq2Seq, cfg: Config, directory: Path) -> torch.nn.Module:
    """Our model as a transformers model, written by save_pretrained, read by AutoModelForSeq2SeqLM."""
    hf_model(transformers, model, cfg, VOCAB).save_pretrained(directory)
    return transformers.AutoModelForSeq2SeqLM.from_pretrained(directory).eval()


SOURCES = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0]])  # (batch, src_len), padded
TARGETS = torch.tensor([[2, 12, 13, 14, 15], [2, 16, 17, 0, 0]])  # (batch, tgt_len)


@pytest.mark.parametrize(
    ("norm", "tie", "hf_class"),
    [
        ("pre", True, "PegasusForConditionalGeneration"),
        ("pre", False, "PegasusForConditionalGeneration"),
        ("post", True, "MarianMTModel"),
        ("post", False, "MarianMTModel"),
    ],
)
def test_the_loaded_model_computes_our_logits(norm: str, tie: bool, hf_class: str, tmp_path: Path) -> None:
    """A padded batch through our forward and through the model from_pretrained loads (which rebuilds
    Marian's position table itself): the same logits, to float32 rounding."""
    model, cfg = random_model(norm, tie)
    if norm == "pre" and not tie and not TRANSFORMERS_5:
        with pytest.raises(UserError, match="transformers 5"):  # transformers 4 shares Pegasus' embeddings
            hf_model(transformers, model, cfg, VOCAB)
        return
    loaded = saved_and_loaded(model, cfg, tmp_path)
    assert type(loaded).__name__ == hf_class
    with torch.no_grad():
        ours = model(SOURCES, (SOURCES != 0).unsqueeze(1), TARGETS).logits  # (batch, tgt_len, vocab)
        theirs = loaded(input_ids=SOURCES, attention_mask=SOURCES != 0, decoder_input_ids=TARGETS).logits
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_greedy_generate_equals_our_greedy_search(norm: str, tmp_path: Path) -> None:
    """generate's settings (decoder start, banned pad and bos, forced eos) give our greedy output, cut at our
    per-sentence limit by max_new_tokens; a random model rarely stops early, so the limit is reached. Its
    nearly flat scores may tie, so a token may differ where ours are within rounding (tests/ties.py)."""
    model, cfg = random_model(norm)
    loaded = saved_and_loaded(model, cfg, tmp_path)
    sources = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15, 16, 17, 18], [19]]
    tokenizers = SimpleNamespace(tgt=SimpleNamespace(banned=(PAD, BOS)))  # search alone: ids in, ids out
    greedy = TorchTranslator.of(model, cfg, tokenizers).with_search(beam_size=1, nbest=1)  # type: ignore[arg-type]
    ours = greedy.search(sources)
    theirs = []
    for source in sources:
        limit = output_limit(len(source), cfg.search)
        generated = loaded.generate(torch.tensor([[*source, 3]]), max_new_tokens=limit + 1)[0].tolist()
        assert generated[0] == 2 and generated[-1] == 3  # bos starts, eos ends (forced at the limit)
        theirs.append(Hypothesis(generated[1:-1], 0.0))
    assert_equal_but_for_ties(model, sources, [h for (h,) in ours], theirs)
    assert sum(len(h.tokens) for (h,) in ours) > 2 * len(sources)


def test_position_tables_equal_transformers_bit_for_bit() -> None:
    """Marian's own table (sin in the first half, cos in the second) is ours with the dimensions permuted."""
    d_model, positions = 64, 1024
    config = transformers.MarianConfig(
        vocab_size=8,
        d_model=d_model,
        encoder_layers=1,
        decoder_layers=1,
        encoder_ffn_dim=8,
        decoder_ffn_dim=8,
        max_position_embeddings=positions,
        pad_token_id=0,
    )
    theirs = transformers.MarianMTModel(config).model.encoder.embed_positions.weight
    ours = sinusoidal_positions(positions, d_model)
    order = [*range(0, d_model, 2), *range(1, d_model, 2)]
    assert torch.equal(ours[:, order], theirs)


def test_the_model_card_states_what_the_model_handles(trained_run: Path) -> None:
    """The card says what the run was trained on (data.domain), or that the run does not say."""
    run = load_run(trained_run, torch.device("cpu"))
    card = model_card(run, "PegasusForConditionalGeneration", "m", 100)
    assert run.cfg.data.domain and f"## What it handles\n\nIts training text: {run.cfg.data.domain}." in card
    unstated = dataclasses.replace(run.cfg, data=dataclasses.replace(run.cfg.data, domain=None))
    card = model_card(dataclasses.replace(run, cfg=unstated), "PegasusForConditionalGeneration", "m", 100)
    assert "does not say what its training text was (`data.domain`)" in card


def test_missing_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'nmt\[huggingface\]'"):
        import_transformers()


def with_hostile_lines(lines: list[str]) -> list[str]:
    """`lines` and, made from their words, an empty line, odd whitespace and characters the vocabulary
    lacks."""
    words = lines[0].split()
    return [*lines, "", "  " + " \t ".join(words) + "\u00a0 ", "€ " + " ✓ ".join(words) + " ☃"]


def exported_greedy(
    export: Path, lines: list[str], search: SearchConfig
) -> tuple[list[list[int]], list[list[int]], list[str]]:
    """The export's source ids (without eos) and greedy output ids and text for each line, generated in one
    padded batch, each output cut at nmt's limit for its source."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(export)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(export).eval()
    batch = tokenizer(lines, return_tensors="pt", padding=True, truncation=True)
    outputs = model.generate(**batch)
    sources, found = [], []
    for ids, mask, output in zip(batch["input_ids"], batch["attention_mask"], outputs, strict=True):
        source = ids[mask.bool()].tolist()
        assert source[-1] == 3
        tokens = output.tolist()[1:]  # after the decoder start
        tokens = tokens[: tokens.index(3)] if 3 in tokens else tokens
        sources.append(source[:-1])
        found.append(tokens[: output_limit(len(source) - 1, search)])
    return sources, found, tokenizer.batch_decode(found, skip_special_tokens=True)


def assert_export_translates_as_nmt(run_dir: Path, lines_file: Path, export: Path) -> None:
    """Source ids, greedy output ids and text of the export equal those of `nmt translate --beam-size 1`
    (ids: but where our scores tie, tests/ties.py; text: where the ids are equal and have no unknown piece,
    which transformers' decoding drops); at least 50 lines."""
    code, out, err = run_cli("export", str(run_dir), str(export), "--to", "huggingface")
    assert code == 0, err
    assert out.strip() == str(export)
    assert {"config.json", "model.safetensors", "vocab.json", "source.spm", "README.md"} <= {
        p.name for p in export.iterdir()
    }
    lines = lines_file.read_text(encoding="utf-8").splitlines()
    code, nmt_text, err = run_cli("translate", str(run_dir), "-i", str(lines_file), "--beam-size", "1")
    assert code == 0, err
    run = load_run(run_dir, torch.device("cpu"))
    translator = TorchTranslator.of_run(run).with_search(beam_size=1, nbest=1)
    nonempty = [line for line in lines if line.strip()]
    our_sources = [ids[: translator.max_source_len] for ids in translator.encode(nonempty)]
    ours = [hyps[0] for hyps in translator.search(our_sources)]
    sources, found, texts = exported_greedy(export, nonempty, run.cfg.search)
    assert sources == our_sources and len(found) >= 50
    theirs = [Hypothesis(tokens, 0.0) for tokens in found]
    differ = assert_equal_but_for_ties(run.model, sources, ours, theirs)
    cut = f" {CUT_MARK}"  # after nmt's translation of a line cut to the limit, which transformers cuts unsaid
    expected = {line: text.removesuffix(cut) for line, text in zip(lines, nmt_text.splitlines(), strict=True)}
    plain = [
        (text, expected[line])
        for i, (line, text, tokens) in enumerate(zip(nonempty, texts, found, strict=True))
        if 1 not in tokens and i not in differ
    ]
    assert len(plain) >= 50 and all(text == nmt for text, nmt in plain)


@pytest.mark.slow
def test_pre_norm_export_translates_as_nmt(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    lines = tmp_path / "lines.txt"
    test_lines = (corpus / "test.src").read_text().splitlines()
    long_line = " ".join(test_lines[:80])  # past the source limit: both cut it there
    lines.write_text("\n".join([*with_hostile_lines(test_lines), long_line]) + "\n", encoding="utf-8")
    export = tmp_path / "hf"
    assert_export_translates_as_nmt(trained_run, lines, export)
    config = transformers.AutoConfig.from_pretrained(export)
    assert config.model_type == "pegasus" and config.decoder_start_token_id == 2


@pytest.mark.slow
def test_post_norm_untied_export_translates_as_nmt(tiny: Path, small_corpus: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    settings = ["model.transformer.norm=post", "model.tie_embeddings=false"]
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "60", *(f"--set={s}" for s in settings))
    assert run_cli(*args)[0] == 0
    lines = tmp_path / "lines.txt"
    test_lines = (small_corpus / "valid.src").read_text().splitlines()[:80]
    lines.write_text("\n".join(with_hostile_lines(test_lines)) + "\n", encoding="utf-8")
    assert_export_translates_as_nmt(run_dir, lines, tmp_path / "hf")
    assert transformers.AutoConfig.from_pretrained(tmp_path / "hf").model_type == "marian"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        (["model.type=rnn-bahdanau", "model.transformer="], ["model.type=rnn-bahdanau", "only Transformers"]),
        (["tokenizer.joint=false"], ["tokenizer.joint=false", "train with tokenizer.joint=true"]),
    ],
)
def test_runs_transformers_cannot_hold_are_refused(
    tiny: Path, small_corpus: Path, tmp_path: Path, settings: list[str], fragments: list[str]
) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "hf"
    args = train_args(tiny, small_corpus, run_dir, "--max-steps", "2", *(f"--set={s}" for s in settings))
    assert run_cli(*args)[0] == 0
    assert_one_line_error(run_cli("export", str(run_dir), str(out), "--to", "huggingface"), *fragments)
    assert not out.exists()


@pytest.mark.slow
def test_bad_options_and_missing_transformers_are_refused(
    trained_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "hf"
    result = run_cli("export", str(trained_run), str(out), "--to", "huggingface", "--quantization", "int8")
    assert_one_line_error(result, "--quantization int8", "float32")
    monkeypatch.setitem(sys.modules, "transformers", None)
    result = run_cli("export", str(trained_run), str(out), "--to", "huggingface")
    assert_one_line_error(result, "transformers is not installed", "nmt[huggingface]")
    assert not out.exists()
