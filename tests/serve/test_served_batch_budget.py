"""`nmt serve --max-batch-tokens` by default: the served models' `search.batch_tokens`, in the unit every
search batches in (nmt/data/batching.py `search_cost`)."""

import dataclasses

from nmt.config.yaml_file import load_config
from nmt.serve.engines import Catalog
from tests.conftest import ROOT


def test_the_server_s_budget_is_the_served_models_search_batch_tokens(catalog: Catalog) -> None:
    """One model: its own; several: the smallest, so that no model's batches exceed its budget."""
    own = load_config(ROOT / "configs" / "tiny-transformer.yaml").search.batch_tokens
    assert catalog.batch_tokens() == own
    name, engines = next(iter(catalog.engines.items()))
    direction, engine = next(iter(engines.items()))
    smaller = dataclasses.replace(engine, translator=engine.translator.with_search(batch_tokens=own // 4))
    both = Catalog({name: engines, "small": {direction: smaller}}, catalog.defaults)
    assert both.batch_tokens() == own // 4
