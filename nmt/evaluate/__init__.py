"""Scoring and showing a trained model: sacreBLEU scores, `nmt evaluate`, heatmaps and learning curves, and
the report written after training."""
