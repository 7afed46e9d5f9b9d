"""The one error every embedding backend raises (its own module: each backend and the package import it)."""


class EmbeddingError(RuntimeError):
    """The embedder could not produce vectors; the message says what to change."""


class EmbeddingConfigError(EmbeddingError):
    """The embedder is misconfigured (a model of the wrong size, an unknown backend): no waiting
    fixes it, so a worker refuses to start rather than run on keywords (degraded mode)."""
