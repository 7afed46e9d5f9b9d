"""A character's portrait: the image of the card it came from (or one the writer uploads), kept as a
small PNG, shown on its pages and the run page, and given back as the image of an exported card."""

from __future__ import annotations

import io

from PIL import Image, UnidentifiedImageError

from chronicle.models import Portrait

PORTRAIT_MAX = 512  # pixels on the longer side: a card's art is often 1–2 MB; shown at 48–160 px


class PortraitError(ValueError):
    """The file is not an image Wonda can read; the message is for the writer."""


def portrait_from_image(raw: bytes) -> bytes:
    """The image as a PNG of at most PORTRAIT_MAX px a side, without any text chunk (a card's
    `chara` stays in the character, not twice in its picture)."""
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise PortraitError(f"this file is not an image Wonda can read ({exc})") from None
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA" if "transparency" in image.info or image.mode in ("LA", "PA") else "RGB")
    image.thumbnail((PORTRAIT_MAX, PORTRAIT_MAX))
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def portrait_set(*, character, png: bytes | None) -> None:
    """Keep (or, with None, drop) the character's portrait, already made by portrait_from_image."""
    if png:
        Portrait.objects.update_or_create(character=character, defaults={"png": png})
    else:
        Portrait.objects.filter(character=character).delete()


def portrait_png(character) -> bytes | None:
    row = Portrait.objects.filter(character=character).only("png").first()
    return bytes(row.png) if row is not None else None


def portrait_image(character) -> Image.Image | None:
    """The character's portrait as an image to draw a card on, or None."""
    png = portrait_png(character)
    if not png:
        return None
    try:
        image = Image.open(io.BytesIO(png))
        image.load()
        return image
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None
