"""Int8 decoding (`nmt translate --int8`): every linear layer and the output projection of a copy of the model
in int8, whose log-probabilities stay close to float32's, the run's model untouched; the CLI takes the flag
on the torch engine and refuses it, in one line, for an export."""

from pathlib import Path

import pytest
import torch
from torch import nn

from nmt.data.special_tokens import BOS
from nmt.models.ensemble import Ensemble
from nmt.models.quantize import Int8Linear, int8_model
from tests.conftest import run_cli
from tests.models.test_decoding_contract import MODELS, random_model, sources


def test_int8_linear_computes_the_float_product() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(32, 48)
    x = torch.randn(5, 3, 32)  # (batch, length, features): any leading dimensions
    with torch.no_grad():
        expected = linear(x)
    found = Int8Linear(linear.weight, linear.bias)(x)
    assert found.shape == expected.shape
    torch.testing.assert_close(found, expected, atol=0.05 * float(expected.abs().max()), rtol=0)
    assert not torch.equal(found, expected)  # int8, not the float layer


@pytest.mark.parametrize(("kind", "cell"), MODELS)
def test_an_int8_model_decodes_as_its_float_model(kind: str, cell: str) -> None:
    model, (src, mask) = random_model(kind, cell), sources()
    quantized = int8_model(model)
    assert not [m for m in quantized.modules() if isinstance(m, nn.Linear)]
    assert isinstance(quantized.output, Int8Linear)  # the tied projection too
    assert model.output is None and any(isinstance(m, nn.Linear) for m in model.modules())  # untouched
    with torch.no_grad():
        steps = []
        for each in (model, quantized):
            memory = each.encode(src, mask)
            state = each.init_state(memory, 4, 2)
            steps.append(each.decode_step(torch.full((src.size(0) * 2,), BOS), memory, state).log_probs)
    spread = float(steps[0].max() - steps[0].min())
    torch.testing.assert_close(steps[1], steps[0], atol=0.05 * spread, rtol=0)


def test_an_ensemble_in_int8_has_every_member_in_int8() -> None:
    members = [random_model("transformer"), random_model("rnn-luong")]
    quantized = int8_model(Ensemble(members))
    assert all(isinstance(member.output, Int8Linear) for member in quantized.members)
    assert not [m for m in quantized.modules() if isinstance(m, nn.Linear)]


def test_translate_int8_on_the_torch_engine(trained_run: Path, corpus: Path) -> None:
    sources_text = "\n".join((corpus / "test.src").read_text().splitlines()[:5]) + "\n"
    code, out, err = run_cli("translate", str(trained_run), "--int8", "--device", "cpu", input=sources_text)
    assert code == 0, err
    assert len(out.splitlines()) == 5 and all(out.splitlines())


def test_int8_is_refused_for_an_export_in_one_line(trained_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    export = tmp_path / "export"
    code, _, err = run_cli("export", str(trained_run), str(export))
    assert code == 0, err
    code, _, err = run_cli("translate", str(export), "--int8", input="a b c\n")
    assert code != 0
    assert err.strip().count("\n") == 0 and "--quantization int8" in err, err
