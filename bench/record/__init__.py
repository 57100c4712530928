"""How results are recorded: the result models, the manifest, MLflow tracking, the summary, the peak cache."""
