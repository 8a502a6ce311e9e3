"""The README.md model card of a Hugging Face export: what the model is, how to load it, generate with it and
push it to the Hub, and where it differs from `nmt translate`."""

from __future__ import annotations

from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import max_source_len

CARD = """\
---
library_name: transformers
pipeline_tag: translation
language: [{languages}]
tags: [translation, nmt]
---

# {title} translation: a Transformer trained with nmt

A `{hf_class}` converted by `nmt export --to huggingface` from the run `{run_name}` (checkpoint
`{checkpoint}`, step {step}): {layers}, d_model {d_model}, {heads} heads, feed-forward {ff_dim}, {norm}-norm
layers, a joint sentencepiece vocabulary of {vocab} pieces, {tied}. Its greedy output equals `nmt translate
--beam-size 1` token for token (float32).{transformers_note}
{directions}
## What it handles

{domain}

## Load and translate

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

model = AutoModelForSeq2SeqLM.from_pretrained("{name}")  # this directory, or "your-name/{name}" on the Hub
tokenizer = AutoTokenizer.from_pretrained("{name}")
batch = tokenizer([{texts}], return_tensors="pt", padding=True, truncation=True)
# greedy: generation_config.json sets num_beams=1
outputs = model.generate(**batch{forced})
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))
```

`generate` stops at eos or after {max_length} decoder positions (`max_length`: enough for the longest source
the tokenizer keeps with `truncation=True`, {max_source} subwords). `nmt translate` stops each sentence
sooner, after {a} × (its subwords + 1) + {b} tokens; to stop where it does, translate a sentence at a time:

```python
ids = tokenizer([sentence], return_tensors="pt", truncation=True)
limit = int({a} * ids["input_ids"].size(1) + {b})  # tokens before eos, as nmt allows
outputs = model.generate(**ids, max_new_tokens=limit + {after}{forced})
```

## Push to the Hub

```python
from huggingface_hub import HfApi

HfApi().create_repo("your-name/{name}", exist_ok=True)  # after `hf auth login`
HfApi().upload_folder(folder_path="{name}", repo_id="your-name/{name}")  # this card included
```

`model.push_to_hub(…)` and `tokenizer.push_to_hub(…)` upload the model and tokenizer without this card.

## Differences from `nmt translate`

- An empty line: nmt answers with an empty line without running the model; the tokenizer makes it the bare
  end-of-sentence token, which the model translates, possibly into text. Leave empty lines out.
- Beam search: `generate(..., num_beams=5)` is transformers' beam search, whose length penalty (score /
  length ** `length_penalty`) differs from nmt's ((5 + length) / 6) ** alpha (alpha {alpha}): beams may
  differ from `nmt translate --beam-size 5`.
- `transformers.pipeline("translation")` does not exist in transformers 5; in 4.x it runs beam search with
  `num_beams=4` whatever generation_config.json says. Call `generate` as above.
- Unknown characters: the ids are nmt's (unknown pieces are `<unk>`, id 1), but
  `batch_decode(..., skip_special_tokens=True)` drops them where nmt writes ` ⁇ `.
- A line that starts with `>>xx<<` has that prefix taken as a language code by `MarianTokenizer`.
- Half precision (`dtype=torch.float16`) is faster but its output may differ from nmt's float32 output.
"""


DIRECTIONS = """
## Directions

It translates {count} directions, {names}: the target language is chosen by its tag, `>>{tgt}<<` for {tgt}.
{how}
"""
ENCODER_TAGS = """Start each text with the tag (`>>{tgt}<< A {src} sentence.`): `MarianTokenizer` puts the
tag's id first in the source, as `nmt translate --tgt-lang {tgt}` does."""
DECODER_TAGS = """The tag is the decoder's first token: generate with
`forced_bos_token_id=tokenizer.convert_tokens_to_ids(">>{tgt}<<")` (as `nmt translate --tgt-lang {tgt}`
forces it); `batch_decode` drops it from the text. Do not start a text with a tag."""


def model_card(run: TrainedRun, hf_class: str, name: str, max_length: int) -> str:
    """The model card of `run` exported as `hf_class` (generating at most `max_length` decoder positions)
    into a directory called `name`."""
    cfg = run.cfg
    model, arch, search = cfg.model, cfg.model.transformer_settings, cfg.search
    layers = f"{model.encoder_layers} encoder and {model.decoder_layers} decoder layers"
    untied = not model.tie_embeddings
    transformers_note = (
        " Its encoder, decoder and output embeddings are three matrices: it needs transformers 5 "
        "(transformers 4 shares one embedding in Pegasus models and loads it wrongly, without an error)."
        if untied and hf_class.startswith("Pegasus")
        else ""
    )
    tied = "separate encoder, decoder and output embeddings" if untied else "one shared embedding matrix"
    source_limit = max_source_len(cfg)
    return CARD.format(
        **_languages(run),
        hf_class=hf_class,
        run_name=run.directory.path.name,
        checkpoint=run.checkpoint_name,
        step=run.checkpoint.get("step"),
        layers=layers,
        d_model=arch.d_model,
        heads=arch.heads,
        ff_dim=arch.ff_dim,
        norm=arch.norm,
        vocab=len(run.tokenizers.src),
        tied=tied,
        transformers_note=transformers_note,
        name=name,
        max_source=source_limit,
        max_length=max_length,
        a=search.max_len_a,
        b=search.max_len_b,
        alpha=search.length_penalty,
        domain=domain_statement(cfg.data.domain),
    )


def domain_statement(domain: str | None) -> str:
    """What a model card says of the text a model was trained on (data.domain), and so of what it handles."""
    if domain is None:
        return (
            "The run does not say what its training text was (`data.domain`). A model translates text like "
            "its training text well and other text badly: try it on the text you mean to translate first."
        )
    return (
        f"Its training text: {domain}. It translates text of that kind; other text (another topic, register "
        "or length) it translates worse, often much worse."
    )


def _languages(run: TrainedRun) -> dict[str, str]:
    """What the card says of the run's languages: its one pair, or a multilingual run's directions and how to
    choose the target language (shown with the first direction)."""
    ml = run.cfg.data.directions
    if not ml.tagged:
        src, tgt = ml.pairs[0].src, ml.pairs[0].tgt
        texts = f'"A {src} sentence.", "Another one."'
        return dict(
            src=src,
            tgt=tgt,
            languages=f"{src}, {tgt}",
            title=f"{src}→{tgt}",
            texts=texts,
            forced="",
            directions="",
            after="1",  # tokens after the limit: eos
        )
    first = ml.pairs[0]
    src, tgt = first.src, first.tgt
    names = ", ".join(f"{d.src}→{d.tgt}" for d in ml.pairs)
    how = (ENCODER_TAGS if ml.tags == "encoder" else DECODER_TAGS).format(src=src, tgt=tgt)
    directions = DIRECTIONS.format(count=len(ml.pairs), names=names, tgt=tgt, how=how)
    if ml.tags == "encoder":
        texts, forced = f'">>{tgt}<< A {src} sentence.", ">>{tgt}<< Another one."', ""
    else:
        texts = f'"A {src} sentence.", "Another one."'
        forced = f', forced_bos_token_id=tokenizer.convert_tokens_to_ids(">>{tgt}<<")'
    languages = ", ".join(ml.languages)
    return dict(
        src=src,
        tgt=tgt,
        languages=languages,
        title=f"Multilingual ({languages})",
        texts=texts,
        forced=forced,
        directions=directions,
        after=str(1 + ml.forced_tokens),  # eos, and the tag
    )
