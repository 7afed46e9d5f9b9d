"""The one error every embedding backend raises (its own module: each backend and the package import it)."""


class EmbeddingError(RuntimeError):
    """The embedder could not produce vectors; the message says what to change."""
