"""A run's distortion filters (paranoia, depression, trauma, the writer's own twist): checked, read, and
the one a search applies."""

from __future__ import annotations

from memory.forming.distortion import Distortion, DistortionError, parse, retrieval_filter


def distortions_check(text: str, *, cast: list[str]) -> None:
    """Raises a ValueError whose message names the first line the filters cannot take."""
    parse(text, cast=cast)


def distortion_filters(text: str, *, cast: list[str]) -> list[Distortion]:
    """The filters the text sets; [] when it sets none, or when it cannot be read (its check refuses it
    on the way in, so only an old row gets here)."""
    try:
        return parse(text, cast=cast) if text else []
    except DistortionError:
        return []


__all__ = ["distortions_check", "distortion_filters", "retrieval_filter"]
