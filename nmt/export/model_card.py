"""The README.md model card of a Hugging Face export: what the model is, how to load it, generate with it and
push it to the Hub, and where it differs from `nmt translate`."""

from __future__ import annotations

from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import max_source_len

CARD = """\
---
library_name: transformers
pipeline_tag: translation
language: [{src}, {tgt}]
tags: [translation, nmt]
---

# {src}→{tgt} translation: a Transformer trained with nmt

A `{hf_class}` converted by `nmt export --to huggingface` from the run `{run_name}` (checkpoint
`{checkpoint}`, step {step}): {layers}, d_model {d_model}, {heads} heads, feed-forward {ff_dim}, {norm}-norm
layers, a joint sentencepiece vocabulary of {vocab} pieces, {tied}. Its greedy output equals `nmt translate
--beam-size 1` token for token (float32).{transformers_note}

## Load and translate

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

model = AutoModelForSeq2SeqLM.from_pretrained("{name}")  # this directory, or "your-name/{name}" on the Hub
tokenizer = AutoTokenizer.from_pretrained("{name}")
batch = tokenizer(["A {src} sentence.", "Another one."], return_tensors="pt", padding=True, truncation=True)
outputs = model.generate(**batch)  # greedy: generation_config.json sets num_beams=1
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))
```

`generate` stops at eos or after {max_length} decoder positions (`max_length`: enough for the longest source
the tokenizer keeps with `truncation=True`, {max_source} subwords). `nmt translate` stops each sentence
sooner, after {a} × (its subwords + 1) + {b} tokens; to stop where it does, translate a sentence at a time:

```python
ids = tokenizer([sentence], return_tensors="pt", truncation=True)
limit = int({a} * ids["input_ids"].size(1) + {b})  # tokens before eos, as nmt allows
outputs = model.generate(**ids, max_new_tokens=limit + 1)
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
        src=cfg.data.src_lang,
        tgt=cfg.data.tgt_lang,
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
    )
