"""Story time in recall: memories dated in the story's calendar (Memory.story_time), said as a reader
says them ("8 May 2023, afternoon"), and the time words of a question ("yesterday", "last week",
"in May", "on 8 May 2023", "three days ago", "two days after the storm") read as a span of story
time against the story's date now."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.db.models import Max, Min

from memory.models import Memory
from memory.recalling.anchors import ANCHORED, KEPT_AHEAD, anchored_turns
from memory.recalling.search import recall

MONTHS = {name: number for number, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")], start=1) for name in names}
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_COUNT = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "several": 3}
_AMOUNT = r"(\d+|a couple of|a few|several|" + "|".join(_COUNT) + r")"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}

_DAY_MONTH = re.compile(rf"\b(?:on\s+)?(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?,?\s*(\d{{4}})?",
                        re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b(?:on\s+)?({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?\s*(\d{{4}})?", re.IGNORECASE)
# A month alone only after "in"/"during"/"since"/"of" or before a year: "May I ask" names no month.
_MONTH_ONLY = re.compile(rf"\b(?:in|during|since|of|early|late)\s+({_MONTH})\b\.?,?\s*(\d{{4}})?|\b({_MONTH})\s+(\d{{4}})\b",
                         re.IGNORECASE)
_AGO = re.compile(rf"\b{_AMOUNT}\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_RELATIVE = re.compile(rf"\b{_AMOUNT}\s+(day|week|month)s?\s+(after|before)\s+(.{{3,80}}?)\s*[?.!]*$", re.IGNORECASE)


# A note that only marks time ("A new day: it is 1:56 pm on 8 May 2023", "Three hours later."): every
# memory carries its own date, so it answers no question by itself.
_TIME_WORDS = re.compile(rf"\b(?:a|an|the|new|next|following|later|that|this|it|is|was|now|on|at|in|of|time|passed|day|days|week|weeks|"
                         rf"month|months|year|years|hours?|minutes?|morning|afternoon|evening|night|noon|midday|dawn|"
                         rf"am|pm|a\.m|p\.m|ago|passes|pass|{_MONTH}|{'|'.join(WEEKDAYS)}|"
                         rf"{'|'.join(k for k in _COUNT if ' ' not in k)}|few|several|couple|\d+(?:st|nd|rd|th)?)\b",
                         re.IGNORECASE)


def only_time(text: str) -> bool:
    """Whether a note says nothing but when it is."""
    rest = _TIME_WORDS.sub(" ", text or "")
    return bool((text or "").strip()) and not re.search(r"[^\W\d_]{2,}", rest)


# A story day kept as one memory (memory.living.days): its category.
DAY_CATEGORY = "day"


def day_part(moment: datetime) -> str:
    hour = moment.hour
    if hour < 5 or hour >= 21:
        return "night"
    return "morning" if hour < 12 else "afternoon" if hour < 17 else "evening"


def said_date(moment: datetime, *, with_time: bool = False) -> str:
    """"8 May 2023, afternoon"; with_time: "Monday 8 May 2023, 1:56 pm"."""
    if with_time:
        clock = moment.strftime("%I:%M %p").lstrip("0").lower()
        return f"{moment.strftime('%A')} {moment.day} {moment.strftime('%B %Y')}, {clock}"
    return f"{moment.day} {moment.strftime('%B %Y')}, {day_part(moment)}"


def said_span(start: datetime, end: datetime) -> str:
    """[start, end) as a reader says it: "19 June 2023", "1 May 2023 to 31 May 2023"."""
    def day(moment: datetime) -> str:
        return f"{moment.day} {moment.strftime('%B %Y')}"
    if start == _day(start) and end == _day(end):
        last = end - timedelta(days=1)
        return day(start) if last <= start else f"{day(start)} to {day(last)}"
    return f"{said_date(start)} to {said_date(end)}"


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _count(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else _COUNT.get(text, 1)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1)
    end = datetime(year + (month == 12), month % 12 + 1, 1)
    return start, end


def story_span(text: str, now: datetime | None, *,
               anchor: Callable[[str], datetime | None] | None = None) -> tuple[datetime, datetime, str] | None:
    """The span of story time a question's words name, as [start, end) with the words matched, or
    None when it names none (or names only what needs a date now, and there is none). `anchor`
    finds when an event happened ("the storm"): "two days after the storm" is read from it."""
    lower = (text or "").lower()
    if match := _DAY_MONTH.search(text or "") or _MONTH_DAY.search(text or ""):
        first, second, year_text = match.groups()
        day, month = (int(first), MONTHS[second.lower()]) if first.isdigit() else (int(second), MONTHS[first.lower()])
        year = int(year_text) if year_text else (now.year if now else None)
        if year is not None:
            try:
                start = datetime(year, month, day)
            except ValueError:
                return None
            return start, start + timedelta(days=1), match.group(0).strip()
    if match := _MONTH_ONLY.search(text or ""):
        name, year_text = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        month = MONTHS[name.lower()]
        year = int(year_text) if year_text else (now.year - (month > now.month) if now else None)
        if year is not None:
            return (*_month_span(year, month), match.group(0).strip())
    if now is None:
        return None
    today = _day(now)
    if match := _RELATIVE.search(text or ""):
        if anchor is not None and (when := anchor(match.group(4))) is not None:
            days = _count(match.group(1)) * _UNIT_DAYS[match.group(2).lower()]
            day = _day(when) + timedelta(days=days if match.group(3).lower() == "after" else -days)
            return day, day + timedelta(days=1), match.group(0).strip()
    if match := _AGO.search(text or ""):
        days = _count(match.group(1)) * _UNIT_DAYS[match.group(2).lower()]
        day = today - timedelta(days=days)
        width = max(1, _UNIT_DAYS[match.group(2).lower()] // 2)  # "two weeks ago": that week, give or take
        return day - timedelta(days=width - 1), day + timedelta(days=width), match.group(0)
    for words, start, end in (
        ("the day before yesterday", today - timedelta(days=2), today - timedelta(days=1)),
        ("yesterday", today - timedelta(days=1), today),
        ("last night", today - timedelta(hours=6), today + timedelta(hours=6)),
        ("earlier today", today, now), ("this morning", today, today + timedelta(hours=12)),
        ("this afternoon", today + timedelta(hours=12), today + timedelta(hours=17)),
        ("this evening", today + timedelta(hours=17), today + timedelta(days=1)), ("tonight", today + timedelta(hours=17), today + timedelta(days=1)),
        ("today", today, today + timedelta(days=1)),
        ("last week", today - timedelta(days=today.weekday() + 7), today - timedelta(days=today.weekday())),
        ("this week", today - timedelta(days=today.weekday()), today + timedelta(days=1)),
        ("last month", *_month_span(now.year - (now.month == 1), (now.month - 2) % 12 + 1)),
        ("this month", datetime(now.year, now.month, 1), today + timedelta(days=1)),
        ("last year", datetime(now.year - 1, 1, 1), datetime(now.year, 1, 1)),
    ):
        if re.search(rf"\b{words}\b", lower):
            return start, end, words
    if match := re.search(r"\b(?:last|on)\s+(" + "|".join(WEEKDAYS) + r")\b", lower):
        back = (today.weekday() - WEEKDAYS.index(match.group(1))) % 7 or 7
        day = today - timedelta(days=back)
        return day, day + timedelta(days=1), match.group(0)
    return None


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=dt_timezone.utc) if moment.tzinfo is None else moment


def turns_within(bank, agent: str, start: datetime, end: datetime) -> tuple[int, int] | None:
    """The first and last turn of the agent's (and the shared) memories dated in [start, end)."""
    span = (Memory.objects.filter(bank=bank, agent__in=[agent, ""], turn__isnull=False,
                                  story_time__gte=_aware(start), story_time__lt=_aware(end))
            .aggregate(first=Min("turn"), last=Max("turn")))
    return (span["first"], span["last"]) if span["first"] is not None else None


def when_of(bank, agent: str, search: Callable[[str], list]) -> Callable[[str], datetime | None]:
    """An anchor for story_span: when the best dated memory a search finds for an event happened."""
    def anchor(event: str) -> datetime | None:
        for result in search(event):
            if result.memory.story_time is not None:
                return result.memory.story_time.replace(tzinfo=None)
        return None
    return anchor


def time_range_turns(ctx, value, flt) -> tuple[int, int, str]:
    """recall_episodes' time_range as turns: [from, to] turn numbers as given, or words read against
    the story's calendar ("yesterday", "in May", "two days after the storm"). ValueError says why not."""
    if isinstance(value, list):
        if len(value) != 2 or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
            raise ValueError("time_range must be words such as \"yesterday\" or \"in May\", or two turn numbers [from, to].")
        return min(value), max(value), ""
    words = str(value or "").strip()
    range_of = re.fullmatch(r"(?:turns?\s*)?(\d+)\s*(?:-|–|to)\s*(\d+)", words, re.IGNORECASE)
    if range_of:
        first, last = int(range_of.group(1)), int(range_of.group(2))
        return min(first, last), max(first, last), ""
    now = ctx.story_now.replace(tzinfo=None) if ctx.story_now else None
    # "Two days after the storm": when the agent's best memory of the storm happened.
    search = lambda event: recall(ctx.bank, event, filter=replace(flt), k=3, options=ctx.recall_options())  # noqa: E731
    span = story_span(words, now, anchor=when_of(ctx.bank, ctx.agent, search))
    if span is None:
        told = f" (it is {said_date(now)} now)" if now else " (this story has no dates: give turns, [from, to])"
        raise ValueError(f"time_range: could not read {words!r} as a time{told}.")
    turns = turns_within(ctx.bank, ctx.agent, span[0], span[1])
    if turns is None:
        raise ValueError(f"You remember nothing dated {span[2]} ({said_span(span[0], span[1])}).")
    return turns[0], turns[1], span[2]


DATED_FIRST = 3  # query_memory: this many memories of the span a question names come first


def dated_first(ctx, query: str, results: list, search: Callable[[tuple[int, int]], list], k: int = 5) -> list:
    """query_memory's results with, first, up to DATED_FIRST of the span its time words name; or,
    for a question anchored on an event (memory.recalling.anchors), up to ANCHORED of the lines
    said around it after the search's own first three (the event may be found wrongly: what the
    search ranks first stays first)."""
    # Only what was formed in the span: the sheet's memories (no turn) pass a turn filter, not a date.
    if span := dated_turns(ctx, query):
        within = [r for r in search(span) if r.memory.turn is not None][:DATED_FIRST]
        ahead = []
    elif span := anchored_turns(ctx, query):
        ahead = results[:KEPT_AHEAD]
        within = [r for r in search(span) if r.memory.turn is not None
                  and r.memory.pk not in {a.memory.pk for a in ahead}][:ANCHORED]
    else:
        return results
    ids = {r.memory.pk for r in [*ahead, *within]}
    return (ahead + within + [r for r in results if r.memory.pk not in ids])[:k]


def dated_turns(ctx, query: str) -> tuple[int, int] | None:
    """The turns of the span a query's time words name ("what did she say yesterday?"), when the
    story has dates and the agent remembers something then; None otherwise."""
    now = ctx.story_now.replace(tzinfo=None) if getattr(ctx, "story_now", None) else None
    span = story_span(query, now)
    return turns_within(ctx.bank, ctx.agent, span[0], span[1]) if span else None
