"""The stream of updates with static shapes over a multilingual run, whose epochs draw other pairs each time:
every batch of every epoch fits a planned shape (none is compiled or captured again), and each drawn pair is
trained on once an epoch."""

from collections import Counter
from pathlib import Path

from nmt.train.progress import Progress
from tests.conftest import make_trainer, prepared


def test_every_batch_of_a_resampled_run_fits_a_planned_shape(three_languages: Path, tmp_path: Path) -> None:
    config = three_languages / "config.yaml"
    sets = ["train.static_shapes=true", "train.max_shapes=8", "data.multilingual.temperature=2.0"]
    ready, overrides = prepared(config, three_languages / "data", tmp_path / "run", *sets)
    trainer = make_trainer(config, ready, tmp_path / "run", overrides)
    stream, examples = trainer.stream, ready.directions.epoch_examples  # type: ignore[union-attr]
    unplanned, batches = 0, 0
    for epoch in range(6):
        progress = Progress(batch_tokens=600, epoch=epoch)
        seen: Counter[int] = Counter()
        for _, update in stream.epoch(progress):
            for batch in update:
                shape = (batch.size, batch.src.size(1), batch.tgt_in.size(1))
                unplanned += shape not in stream.bucket_plan(600).shapes
                batches += 1
                seen.update(i for i in batch.index.tolist() if i >= 0)  # -1: a padding row
        drawn = examples(trainer.cfg.train.seed + epoch)
        assert drawn is not None and seen == Counter(drawn.tolist())
    assert batches > 200 and unplanned == 0
