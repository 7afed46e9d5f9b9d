"""Import and export: Wonda's own JSON and SillyTavern Character Card V2 (JSON, or PNG with a `chara` chunk).

Every import validates the whole file first and saves in one transaction, so a bad file saves nothing.
Card V2 → Wonda mapping (docs/using.md, "Character Card V2 mapping"):
  data.name → name; data.description → description; data.personality → traits (split on commas/
  semicolons/new lines; kept verbatim in card_extras when it is prose); data.character_book.entries →
  extra_memories (content + keys; the keys become canonical queries); data.extensions.wonda → the
  Wonda fields a card has no place for (role, archetype, public_face, background, styles, skills,
  values, goals, secrets, knowledge); everything else (first_mes, mes_example, scenario, creator_notes, system_prompt,
  post_history_instructions, alternate_greetings, tags, creator, character_version, the other
  extensions, character_book's own settings) → card_extras, and export gives it back unchanged.
Export is chronicle.services.card_export. Card text keeps its macros ({{char}}, {{user}}) as written: Character.to_sheet resolves them.
A name the writer already uses is refused with `clashes` set; `as_copy` imports under "Name (2)".
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from PIL import Image, UnidentifiedImageError

from chronicle.forms import upload_limit_message
from chronicle.models import TEXT_LIMIT, Character, Scenario
from chronicle.services.card_checks import SHORT_LIMITS
from chronicle.services.card_checks import Checker as _Checker
from chronicle.services.card_export import CARD_SPEC, WONDA_FORMAT  # the formats' shape, shared with export
from chronicle.services.card_v2 import character_from_card as _character_from_card
from chronicle.services.card_v2 import sheet_fields
from chronicle.services.characters import character_request_preview
from chronicle.services.portraits import PortraitError, portrait_from_image, portrait_set
from chronicle.services.scenarios import clean_pair_notes, clean_pair_standing, scenario_create
from chronicle.simulation.control.services import file_settings_errors
from memory.api import text_problem_in



class CardImportError(Exception):
    """A file that cannot be imported; `errors` name each problem ("data.name is missing").

    `clashes`: the names the writer already uses, when that is the only problem: the file can be
    imported as a copy (card_import(as_copy=True)).
    """

    def __init__(self, errors: list[str], *, clashes: list[str] | None = None, copies: dict[str, str] | None = None):
        self.errors = errors
        self.clashes = clashes or []
        self.copies = copies or {}  # the names the copies would get: exactly what as_copy=True does
        super().__init__("; ".join(errors))


@dataclass
class ImportResult:
    characters: list[Character] = field(default_factory=list)
    scenario: Scenario | None = None


def _character_from_wonda(data: Any, path: str, check: _Checker) -> dict | None:
    if not isinstance(data, dict):
        check.errors.append(f"{path.rstrip('.')} must be an object")
        return None
    values: dict[str, Any] = {"name": check.text(data, "name", path, required=True, limit=100).strip(),
                              **sheet_fields(data, path, check)}
    values["extra_memories"] = check.memories(data.get("extra_memories"), f"{path}extra_memories")
    extras = data.get("card_extras") or {}
    if not isinstance(extras, dict):
        check.errors.append(f"{path}card_extras must be an object")
        extras = {}
    values["card_extras"] = extras
    return values


# --- Card V2 ----------------------------------------------------------------------------------

def _card_from_png(raw: bytes) -> Any:
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
        chunks = getattr(image, "text", None) or image.info
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise CardImportError([f"this file is not a readable PNG image ({exc})"]) from None
    encoded = chunks.get("chara")
    if not encoded:
        raise CardImportError(["this PNG has no chara chunk (it is an image, not a character card)"])
    try:
        return json.loads(base64.b64decode(encoded, validate=False).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise CardImportError(["the PNG's chara chunk is not base64-encoded JSON"]) from None


# --- Wonda JSON -------------------------------------------------------------------------------

def _scenario_from_wonda(data: Any, check: _Checker, names: list[str]) -> dict | None:
    if not isinstance(data, dict):
        check.errors.append("scenario must be an object")
        return None
    values = {"title": check.text(data, "title", "scenario.", required=True, limit=200).strip()}
    for key in ("location", "atmosphere", "time_of_day", "description", "user_name"):
        values[key] = check.text(data, key, "scenario.", limit=SHORT_LIMITS.get(key, TEXT_LIMIT))
    # A scene that names no cast is played by every character in the file.
    values["cast"] = check.items(data, "cast", "scenario.", limit=100) if "cast" in data else list(names)
    for name in values["cast"]:
        if name not in names:
            check.errors.append(f"scenario.cast names {name}, who is not in characters")
    notes = data.get("pair_notes") or {}
    if not isinstance(notes, dict) or not all(isinstance(v, dict) for v in notes.values()):
        check.errors.append("scenario.pair_notes must map names to {name: text}")
        notes = {}
    values["pair_notes"] = notes
    values["pair_standing"] = _standing_from_wonda(data.get("pair_standing") or {}, check)
    return values


def _standing_from_wonda(standing: Any, check: _Checker) -> dict:
    """scenario.pair_standing: {name: {name: {"trust": −1..1, "affinity": −1..1}}}, each refusal named."""
    rows = standing.values() if isinstance(standing, dict) else [None]
    pairs = [(a, o, p) for a, row in standing.items() for o, p in row.items()] if all(isinstance(r, dict) for r in rows) else None
    bad = [f"{a}.{o}" for a, o, p in pairs or [] if not isinstance(p, dict) or any(
        k not in ("trust", "affinity") or isinstance(v, bool) or not isinstance(v, (int, float)) or not -1 <= v <= 1
        for k, v in p.items())]
    if pairs is None or bad:
        check.errors.append(f"scenario.pair_standing{'.' + bad[0] if bad else ''}: map names to {{name: {{\"trust\": …, "
                            "\"affinity\": …}}, each a number from -1 to 1")
        return {}
    return standing


def _text_checked(data: Any) -> Any:
    """The whole file by the one text rule (memory's, as the forms and the API): JSON can carry
    "\\u0000" or a lone surrogate, which PostgreSQL cannot store, in any field or extra."""
    if problem := text_problem_in(data):
        raise CardImportError([problem])
    return data


def _parse(raw: bytes) -> tuple[str, Any]:
    too_large = upload_limit_message(len(raw))  # callers other than the import page (the form checks it first)
    if too_large:
        raise CardImportError([too_large])
    if not raw.strip():
        raise CardImportError(["the file is empty"])
    if raw.startswith(b"\x89PNG"):
        return "card", _text_checked(_card_from_png(raw))
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise CardImportError(["this file is neither JSON nor a PNG image"]) from None
    except json.JSONDecodeError as exc:
        raise CardImportError([f"this file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"]) from None
    data = _text_checked(data)
    if isinstance(data, dict) and data.get("format") == WONDA_FORMAT:
        return "wonda", data
    if isinstance(data, dict) and ("spec" in data or "data" in data):
        return "card", data
    if isinstance(data, dict) and "name" in data and "description" in data:
        raise CardImportError([f"spec must be {CARD_SPEC} (this looks like an older V1 card)"])
    raise CardImportError(["this JSON is neither a Wonda export nor a Character Card V2 (no spec or format)"])


def _build_characters(owner, rows: list[dict], check: _Checker) -> list[Character]:
    seen: set[str] = set()
    characters = []
    for i, row in enumerate(rows):
        label = row["name"] or f"character {i + 1}"
        if row["name"] in seen:
            check.errors.append(f"{label} appears twice in the file")
        seen.add(row["name"])
        portrait = row.pop("portrait", None)
        character = Character(owner=owner, **row)
        character.imported_portrait = portrait  # kept by _save, once the character has its id
        try:
            character.full_clean()
        except ValidationError as exc:
            for key, messages in exc.message_dict.items():
                where = "" if key == "__all__" else f"{key}: "
                check.errors.extend(f"{label}: {where}{m}" for m in messages)
        characters.append(character)
    return characters


def copy_name(name: str, taken: set[str]) -> str:
    """`name` if free, else "name (2)", "name (3)", … (taken: lower-cased names; fits in 100 characters)."""
    if name.lower() not in taken:
        return name
    number = 2
    while True:
        suffix = f" ({number})"
        candidate = name[:100 - len(suffix)].rstrip() + suffix
        if candidate.lower() not in taken:
            return candidate
        number += 1


def _rename(rows: list[dict], scenario_values: dict | None, renamed: dict[str, str]) -> None:
    """Apply renames everywhere the file names a character: names, knowledge, the cast, pair notes."""
    def new(name: str) -> str:
        return renamed.get(name, name)

    for row in rows:
        row["name"] = new(row["name"])
        row["knowledge"] = {new(k): v for k, v in (row.get("knowledge") or {}).items()}
    if scenario_values is not None:
        scenario_values["cast"] = [new(n) for n in scenario_values["cast"]]
        scenario_values["pair_notes"] = {new(k): {new(o): t for o, t in row.items()} if isinstance(row, dict) else row
                                         for k, row in scenario_values["pair_notes"].items()}
        scenario_values["pair_standing"] = {new(k): {new(o): t for o, t in row.items()} if isinstance(row, dict) else row
                                            for k, row in scenario_values.get("pair_standing", {}).items()}
        scenario_values["run_settings"] = {key: renamed_in(value, renamed)
                                           for key, value in (scenario_values.get("run_settings") or {}).items()}


def renamed_in(value, renamed: dict[str, str]):
    """A setting's text with each renamed character's name replaced by its copy's (whole words)."""
    if not isinstance(value, str) or not renamed:
        return value
    pattern = re.compile(r"\b(" + "|".join(re.escape(name) for name in sorted(renamed, key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: renamed[m.group(1)], value)


def _resolve_clashes(owner, rows: list[dict], scenario_values: dict | None, *, as_copy: bool) -> None:
    # The character form refuses a name that differs only in case; so does an import.
    taken = {n.lower() for n in Character.objects.owned_by(owner).values_list("name", flat=True)}
    clashes = [r["name"] for r in rows if r["name"] and r["name"].lower() in taken]
    if not clashes:
        return
    taken |= {r["name"].lower() for r in rows if r["name"] not in clashes}
    renamed = {}
    for name in clashes:
        renamed[name] = copy_name(name, taken)
        taken.add(renamed[name].lower())
    if not as_copy:
        raise CardImportError([f"You already have a character named {n}." for n in clashes], clashes=clashes,
                              copies=renamed)
    _rename(rows, scenario_values, renamed)


def import_match(*, owner, raw: bytes, settings: bool = True) -> tuple[ImportResult, dict[str, str]] | None:
    """The writer's own scenario and cast that this Wonda scenario file holds already (the same text,
    under the file's names or the copy names an earlier import gave them), with those names as
    {file's name: copy's name}; None when there is none. Running one file again then runs what it
    imported before, rather than a new copy each time ("Alex (3)"), whose name its character says.
    `settings` False: the scenario's stored run settings may differ (a command line runs with the file's)."""
    try:
        kind, data = _parse(raw)
    except CardImportError:
        return None
    if kind != "wonda" or not isinstance(data.get("scenario"), dict) or not isinstance(data.get("characters"), list):
        return None
    check = _Checker()
    rows = [_character_from_wonda(c, "", check) for c in data["characters"]]
    values = _scenario_from_wonda(data["scenario"], check, [r["name"] for r in rows if r])
    if check.errors or values is None:
        return None
    if settings:
        values["run_settings"] = dict(data["settings"]) if isinstance(data.get("settings"), dict) else {}
    matches = []
    for scenario in Scenario.objects.owned_by(owner).filter(title=values["title"]).order_by("pk").prefetch_related("cast"):
        cast = {c.name: c for c in scenario.cast.all()}
        renamed = {row["name"]: _name_or_copy(row["name"], cast) for row in rows}
        if None in renamed.values() or len(cast) != len(rows) or len(set(renamed.values())) != len(rows):
            continue
        file_rows, file_values = copy.deepcopy(rows), copy.deepcopy(values)
        _rename(file_rows, file_values, {k: v for k, v in renamed.items() if k != v})
        file_values["pair_notes"] = clean_pair_notes(file_values["pair_notes"], set(cast))
        file_values["pair_standing"] = clean_pair_standing(file_values.get("pair_standing", {}), set(cast))
        same_cast = all(getattr(cast[row["name"]], key) == value
                        for row in file_rows for key, value in row.items() if key != "portrait")
        compared = [key for key in file_values if key != "cast" and (settings or key != "run_settings")]
        if same_cast and all(getattr(scenario, key) == file_values[key] for key in compared):
            characters = [cast[row["name"]] for row in file_rows]
            matches.append((ImportResult(characters=characters, scenario=scenario), {k: v for k, v in renamed.items() if k != v}))
    # The one under the file's own names if there is one (not a copy), else the oldest copy.
    return min(matches, key=lambda match: len(match[1]), default=None)


def _name_or_copy(name: str, cast: dict[str, Character]) -> str | None:
    """`name` if the cast has it, else the one copy of it there ("name (2)"), else None."""
    if name in cast:
        return name
    copies = [n for n in cast if re.fullmatch(re.escape(name) + r" \(\d+\)", n)]
    return copies[0] if len(copies) == 1 else None


def card_import(*, owner, raw: bytes, as_copy: bool = False) -> ImportResult:
    """Import one file (Wonda JSON, Card V2 JSON or Card V2 PNG); all or nothing.

    A name the writer already uses stops the import with CardImportError.clashes set, unless
    `as_copy`: then the file's character is imported under a free name ("Seraphina (2)").
    """
    kind, data = _parse(raw)
    check = _Checker()
    scenario_values = None
    if kind == "card":
        rows = [_character_from_card(data, check)]
        if rows[0] is not None and raw.startswith(b"\x89PNG"):
            try:  # the card's picture: its portrait
                rows[0]["portrait"] = portrait_from_image(raw)
            except PortraitError as exc:
                check.errors.append(str(exc))
    elif "scenario" in data:
        chars = data.get("characters") or []
        if not isinstance(chars, list):
            check.errors.append("characters must be a list")
            chars = []
        rows = [_character_from_wonda(c, f"characters[{i}].", check) for i, c in enumerate(chars)]
        scenario_values = _scenario_from_wonda(data["scenario"], check, list(dict.fromkeys(r["name"] for r in rows if r)))
        if scenario_values is not None and data.get("settings") is not None:
            # Its run's settings (turns, mode, stage directions, beliefs, distortions…): kept with the
            # scenario, which "Run this scenario" starts from; checked now, so a bad one is named here.
            check.errors += file_settings_errors(data["settings"], cast_names=scenario_values["cast"])
            scenario_values["run_settings"] = dict(data["settings"]) if isinstance(data["settings"], dict) else {}
    elif "character" in data:
        rows = [_character_from_wonda(data["character"], "character.", check)]
    else:
        raise CardImportError(["this Wonda file has neither a character nor a scenario"])
    if check.errors:
        raise CardImportError(check.errors)
    rows = [r for r in rows if r]
    _resolve_clashes(owner, rows, scenario_values, as_copy=as_copy)
    characters = _build_characters(owner, rows, check)
    if check.errors:
        raise CardImportError(check.errors)
    return _save(owner=owner, characters=characters, scenario_values=scenario_values)


@transaction.atomic
def _save(*, owner, characters: list[Character], scenario_values: dict | None) -> ImportResult:
    for character in characters:
        character.save()
        portrait_set(character=character, png=getattr(character, "imported_portrait", None))
        character_request_preview(character=character)
    result = ImportResult(characters=characters)
    if scenario_values is not None:
        by_name = {c.name: c for c in characters}
        cast = [by_name[name] for name in scenario_values.pop("cast")]
        try:
            result.scenario = scenario_create(owner=owner, data=scenario_values, cast=cast)
        except ValidationError as exc:  # leaving the atomic block by exception undoes the characters too
            raise CardImportError([f"scenario.{k}: {m}" for k, ms in exc.message_dict.items() for m in ms]) from None
    return result


# --- a file held between "this name is taken" and "import as a copy" ------------------------

HOLD_SECONDS = 3600


def _held_path(owner, token: str) -> Path | None:
    if not re.fullmatch(r"[A-Za-z0-9_-]{16,64}", token or ""):
        return None
    # The owner's id is in the file name: another writer's token finds nothing.
    return Path(settings.VAR_DIR) / "imports" / f"{owner.pk}-{token}.upload"


def import_hold(*, owner, raw: bytes) -> str:
    """Keep an uploaded file (on disk, not in the session: a card may be megabytes) so that the
    writer can import it as a copy without choosing it again; returns its token. Files older than
    HOLD_SECONDS are removed on the way."""
    folder = Path(settings.VAR_DIR) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.upload"):
        try:
            if old.stat().st_mtime < time.time() - HOLD_SECONDS:
                old.unlink()
        except FileNotFoundError:
            pass
    token = secrets.token_urlsafe(16)
    _held_path(owner, token).write_bytes(raw)
    return token


def import_held(*, owner, token: str) -> bytes | None:
    """The file held under `token` for this writer, or None (unknown, another writer's, expired)."""
    path = _held_path(owner, token)
    try:  # another writer's import may sweep an expired file away meanwhile
        if path is None or path.stat().st_mtime < time.time() - HOLD_SECONDS:
            return None
        return path.read_bytes()
    except FileNotFoundError:
        return None


def import_release(*, owner, token: str) -> None:
    path = _held_path(owner, token)
    if path is not None:
        path.unlink(missing_ok=True)
