"""A question's time words read against the story's date (memory.recalling.story_time)."""

from __future__ import annotations

from datetime import datetime

import pytest

from memory.recalling.story_time import only_time, said_date, said_span, story_span

NOW = datetime(2023, 6, 20, 19, 30)  # a Tuesday evening


@pytest.mark.parametrize("words, start, end", [
    ("what happened yesterday?", datetime(2023, 6, 19), datetime(2023, 6, 20)),
    ("what did she say today", datetime(2023, 6, 20), datetime(2023, 6, 21)),
    ("the day before yesterday", datetime(2023, 6, 18), datetime(2023, 6, 19)),
    ("what did we talk about in May?", datetime(2023, 5, 1), datetime(2023, 6, 1)),
    ("on 8 May 2023", datetime(2023, 5, 8), datetime(2023, 5, 9)),
    ("on May 9", datetime(2023, 5, 9), datetime(2023, 5, 10)),
    ("last week", datetime(2023, 6, 12), datetime(2023, 6, 19)),
    ("last month", datetime(2023, 5, 1), datetime(2023, 6, 1)),
    ("last Sunday", datetime(2023, 6, 18), datetime(2023, 6, 19)),
])
def test_time_words_name_a_span_of_story_time(words, start, end):
    span = story_span(words, NOW)
    assert span is not None and span[:2] == (start, end)


def test_in_december_is_last_december_and_a_date_needs_no_now():
    assert story_span("in December", NOW)[:2] == (datetime(2022, 12, 1), datetime(2023, 1, 1))
    assert story_span("on 8 May 2023", None)[:2] == (datetime(2023, 5, 8), datetime(2023, 5, 9))
    assert story_span("yesterday", None) is None  # no date now: nothing to count back from


@pytest.mark.parametrize("words", ["May I ask what you think?", "what did Sam say about the budget?", "a week of rain"])
def test_words_that_name_no_time_name_no_span(words):
    assert story_span(words, NOW) is None


def test_two_days_after_an_event_counts_from_when_it_happened():
    storm = datetime(2023, 6, 2, 22, 0)
    span = story_span("what did we do two days after the storm?", NOW,
                      anchor=lambda event: storm if "storm" in event else None)
    assert span[:2] == (datetime(2023, 6, 4), datetime(2023, 6, 5))


def test_a_date_is_said_as_a_reader_says_it():
    assert said_date(datetime(2023, 5, 8, 13, 56)) == "8 May 2023, afternoon"
    assert said_date(datetime(2023, 5, 8, 13, 56), with_time=True) == "Monday 8 May 2023, 1:56 pm"


def test_a_span_of_whole_days_is_said_as_dates():
    assert said_span(datetime(2023, 6, 19), datetime(2023, 6, 20)) == "19 June 2023"
    assert said_span(datetime(2023, 5, 1), datetime(2023, 6, 1)) == "1 May 2023 to 31 May 2023"


@pytest.mark.parametrize("question, anchor", [
    ("What did Orla say the moment the power went out?", ("at", "the power went out")),
    ("What did Declan say he would do right after the big wave took the bollards?", ("after", "the big wave took the bollards")),
    ("What did Orla say about her supplies on the morning the ferry turned back?", ("day", "the ferry turned back")),
    ("Where was Sam just before the lights went out?", ("before", "the lights went out")),
    ("What did I say to Nessa when she handed me the money?", ("at", "she handed me the money")),
])
def test_a_question_anchored_on_an_event_names_the_event(question, anchor):
    from memory.recalling.anchors import anchor_of

    assert anchor_of(question) == anchor


@pytest.mark.parametrize("question", ["When did Caroline go to the support group?", "What did Sam say about the budget?",
                                      "What is my job?", "Who was here after all?"])
def test_a_question_with_no_event_clause_has_no_anchor(question):
    from memory.recalling.anchors import anchor_of

    assert anchor_of(question) is None


@pytest.mark.parametrize("note, bare", [
    ("A new day: it is 1:56 pm on 8 May 2023", True), ("Three hours later.", True), ("The next morning", True),
    ("Tuesday morning", True), ("2023-05-08", True), ("Time passed: An hour later", True),
    ("Two days later. The storm has passed.", False), ("A letter dated 3 March arrives", False),
    ("That evening, Orla leaves.", False),
])
def test_a_note_that_only_says_when_it_is_is_told_from_one_that_says_what_happens(note, bare):
    assert only_time(note) is bare
