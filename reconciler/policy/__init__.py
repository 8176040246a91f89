"""CEL policy rules: documents, compile and evaluate, the Kubernetes CEL helpers (pure)."""
