"""The story calendar: the date and time in the story at each turn.

A run may start at a date and time (Simulation.story_start). From there, story time moves by the
run's minutes a turn and by the writer's time skips, which may be relative ("Three hours later",
"The next day", "Two weeks later", "That evening", "Tuesday morning") or absolute ("A new day: it
is 1:56 pm on 8 May 2023", "8 May 2023", "It is 3 pm"). A run without a start date gets one from
its first absolute skip; before that, and in a run with neither, there is no date: memories age
by turns and the header says the turn.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from chronicle.simulation.story.stage import Direction, skipped_minutes
from memory.api import story_time

REFLECTIONS_PER_DAY = 3  # seed 003: at most three reflections an agent a day (a story day, here)
PARTS = {"dawn": 6, "morning": 9, "noon": 12, "midday": 12, "lunchtime": 12, "afternoon": 15, "evening": 19,
         "night": 22, "midnight": 0}
_MONTH = "|".join(sorted(story_time.MONTHS, key=len, reverse=True))
_CLOCK = r"(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s*m\b\.?"
_TIME = re.compile(_CLOCK, re.IGNORECASE)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?,?\s*(\d{{4}})?", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?\s*(\d{{4}})?", re.IGNORECASE)
_SETS_DATE = re.compile(rf"(?:it is|it's|it was|now|today is|on|at)\b|\d|(?:{_MONTH}|{'|'.join(story_time.WEEKDAYS)})\b",
                        re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?\b")
_NUMBER = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "several": 3, "a few": 3, "few": 3}
_LATER = re.compile(r"(\d+|a few|several|" + "|".join(_NUMBER) + r")\s+(day|week|month|year)s?\s+(?:later|pass(?:es)?|on)\b",
                    re.IGNORECASE)
_NEXT = re.compile(r"(?:the\s+)?(next|following)\s+(day|morning|afternoon|evening|night|week|month)\b", re.IGNORECASE)
_SAME_DAY = re.compile(r"(?:that|this|later that|later this)\s+(morning|afternoon|evening|night)\b", re.IGNORECASE)
_WEEKDAY = re.compile(r"(?:on\s+|next\s+)?(" + "|".join(story_time.WEEKDAYS) + r")\b(?:\s+(morning|afternoon|evening|night))?",
                      re.IGNORECASE)


def _at_hour(day: datetime, hour: int, minute: int = 0) -> datetime:
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0)


def _clock_in(text: str) -> tuple[int, int] | None:
    match = _TIME.search(text)
    if not match:
        return None
    hour, minute = int(match.group(1)) % 12, int(match.group(2) or 0)
    return hour + (12 if match.group(3).lower() == "p" else 0), minute


def _date_in(text: str, now: datetime | None) -> datetime | None:
    """An absolute date the text names ("8 May 2023", "May 8, 2023", "2023-05-08", "8 May" in the
    current year), at the clock time it names or midnight; None when it names none."""
    if match := _ISO.search(text):
        year, month, day = int(match.group(1)), int(match.group(2)), int(match.group(3))
        hour, minute = (int(match.group(4)), int(match.group(5))) if match.group(4) else (PARTS["morning"], 0)
    elif (match := _DAY_MONTH.search(text)) or (match := _MONTH_DAY.search(text)):
        first, second, year_text = match.groups()
        day, month = (int(first), story_time.MONTHS[second.lower()]) if first.isdigit() else (int(second), story_time.MONTHS[first.lower()])
        if year_text:
            year = int(year_text)
        elif now is not None:
            year = now.year
        else:
            return None
        hour, minute = PARTS["morning"], 0  # a day named without its hour: the morning
    else:
        return None
    try:
        moment = datetime(year, month, day, hour, minute)
    except ValueError:
        return None
    if (clock := _clock_in(text)) is not None:
        moment = _at_hour(moment, *clock)
    return moment


def _clauses(text: str) -> list[str]:
    """The text and each clause after a colon or comma: a relative skip counts where a clause opens
    with it ("The next day", "A new day: that evening"), not in passing ("the ferry left on Tuesday")."""
    return [part.strip() for part in re.split(r"[:;,]", text) if part.strip()]


def moved(text: str, now: datetime | None) -> datetime | None:
    """Where a stage direction moves the story's clock from `now`, or None when it does not move it
    (or moves it only relatively while there is no date yet: skipped_minutes reads those)."""
    for clause in (part.strip() for part in re.split(r":\s|;", text)):
        # A date sets the calendar where a clause opens with it ("8 May 2023", "it is 1:56 pm on 8
        # May 2023"), not in passing ("A letter dated 3 March arrives").
        if _SETS_DATE.match(clause) and (absolute := _date_in(clause, now)) is not None:
            return absolute
    if now is None:
        return None
    clock = _clock_in(text)
    for clause in _clauses(text):
        if minutes := skipped_minutes(clause):
            return now + timedelta(minutes=minutes)
        if match := _LATER.match(clause):
            amount = match.group(1).lower()
            count = int(amount) if amount.isdigit() else _NUMBER.get(amount, 1)
            days = {"day": 1, "week": 7, "month": 30, "year": 365}[match.group(2).lower()] * count
            return now + timedelta(days=days)
        if re.match(r"(?:a\s+)?new\s+day\b", clause, re.IGNORECASE):
            return _at_hour(now + timedelta(days=1), *(clock or (PARTS["morning"], 0)))
        if match := _NEXT.match(clause):
            what = match.group(2).lower()
            if what in ("week", "month"):
                return now + timedelta(days=7 if what == "week" else 30)
            day = now + timedelta(days=1)
            return _at_hour(day, PARTS[what]) if what in PARTS else day
        if match := _SAME_DAY.match(clause):
            later = _at_hour(now, PARTS[match.group(1).lower()])
            return later if later > now else now
        if match := _WEEKDAY.match(clause):
            ahead = (story_time.WEEKDAYS.index(match.group(1).lower()) - now.weekday()) % 7 or 7
            part = (match.group(2) or "morning").lower()
            return _at_hour(now + timedelta(days=ahead), *(clock or (PARTS[part], 0)))
        if clock is not None and re.match(r"(?:it is|it's|now|at)\b", clause, re.IGNORECASE):
            later = _at_hour(now, *clock)
            return later if later >= now else later + timedelta(days=1)
    return None


def story_times(directions: list[Direction], *, start: datetime | None, minutes_per_turn: float,
                turns: int) -> list[datetime | None]:
    """The story's date and time at each turn 0..turns (turn 0: the start); None where there is no
    date yet. A skip at turn N is between lines N − 1 and N."""
    events: dict[int, list[Direction]] = {}
    for direction in directions:
        if direction.kind == "event" and direction.turn <= turns:
            events.setdefault(direction.turn, []).append(direction)
    times: list[datetime | None] = [start]
    now = start
    for number in range(1, turns + 1):
        if now is not None and number > 1 and minutes_per_turn:
            now += timedelta(minutes=minutes_per_turn)
        for direction in events.get(number, []):
            now = moved(direction.text, now) or now
        times.append(now)
    return times


def story_time_at(directions: list[Direction], *, start: datetime | None, minutes_per_turn: float,
                  number: int) -> datetime | None:
    """story_times' date at one turn, reading only the skips (a turn of a long run asks several times)."""
    now, last = start, 1
    for direction in sorted((d for d in directions if d.kind == "event" and d.turn <= number), key=lambda d: d.turn):
        if now is not None and minutes_per_turn:
            now += timedelta(minutes=minutes_per_turn * (max(direction.turn, 1) - last))
        last = max(direction.turn, 1)
        now = moved(direction.text, now) or now
    if now is not None and minutes_per_turn:
        now += timedelta(minutes=minutes_per_turn * (number - last))
    return now


def story_times_at(directions: list[Direction], *, start: datetime | None, minutes_per_turn: float,
                   numbers) -> dict[int, datetime | None]:
    """story_time_at at each of `numbers`, the skips walked once for them all (a page of a long run's
    lines would read every skip before each of its lines)."""
    events = sorted((d for d in directions if d.kind == "event"), key=lambda d: d.turn)
    times: dict[int, datetime | None] = {}
    now, last, at = start, 1, 0
    for number in sorted(set(numbers)):
        while at < len(events) and events[at].turn <= number:
            direction = events[at]
            if now is not None and minutes_per_turn:
                now += timedelta(minutes=minutes_per_turn * (max(direction.turn, 1) - last))
            last = max(direction.turn, 1)
            now = moved(direction.text, now) or now
            at += 1
        times[number] = now + timedelta(minutes=minutes_per_turn * (number - last)) \
            if now is not None and minutes_per_turn else now
    return times


def at_daily_limit(counts: dict[str, int]) -> set[str]:
    """Who has reflected REFLECTIONS_PER_DAY times on the story's day already (seed 003's daily limit)."""
    return {name for name, count in counts.items() if count >= REFLECTIONS_PER_DAY}


def short_date(moment: datetime) -> str:
    """A line's date on the run page: "Tue 14 Jan 2025, 9:04 am"."""
    return f"{moment.strftime('%a')} {moment.day} {moment.strftime('%b %Y')}, {moment.strftime('%I:%M %p').lstrip('0').lower()}"


def day_of(moment: datetime) -> tuple[datetime, datetime]:
    """The story day a moment falls on, [midnight, the next midnight)."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day, day + timedelta(days=1)


def skips_from(times: list[datetime | None], minutes_per_turn: float) -> list[float] | None:
    """The calendar as memory's decay reads a clock (stage.clock_skips): for each turn, the turns'
    worth of time that passed beyond the turns themselves. None without a clock or a date."""
    if not minutes_per_turn or minutes_per_turn <= 0 or not any(times):
        return None
    skips, first = [], next((i for i, t in enumerate(times) if t is not None), None)
    for number, moment in enumerate(times):
        if moment is None or first is None or number <= first:
            skips.append(0.0)
            continue
        elapsed = (moment - times[first]).total_seconds() / 60
        skips.append(max(0.0, elapsed / minutes_per_turn - (number - first)))
    return skips
