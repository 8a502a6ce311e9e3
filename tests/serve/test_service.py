"""What service.py makes of a decode result: subwords of source and output, each ending with '</s>' so that
they label the rows and columns of the attention returned beside them."""

from pathlib import Path

import torch

from nmt.data.tokenizer import load_tokenizers
from nmt.decode.search import Hypothesis
from nmt.serve.engines import Translated
from nmt.serve.service import _line


def test_an_empty_output_of_a_sentence_has_the_eos_row_its_attention_has(trained_run: Path) -> None:
    tokenizers = load_tokenizers(trained_run, joint=True)
    ids = tokenizers.src.encode(["a b"])[0]
    weights = torch.full((1, 1, 1, len(ids) + 1), 1 / (len(ids) + 1))  # (layers, heads, eos row, src + eos)
    line = _line(tokenizers, ids, Translated([Hypothesis([], -1.0)], [weights]))
    (found,) = line.hypotheses
    assert found.text == ""
    assert found.pieces == ["</s>"]
    assert len(line.source_pieces) == weights.shape[-1]


def test_a_blank_line_has_no_subwords(trained_run: Path) -> None:
    tokenizers = load_tokenizers(trained_run, joint=True)
    line = _line(tokenizers, [], Translated([Hypothesis([], 0.0)]))
    assert line.source_pieces == [] and line.hypotheses[0].pieces == []
