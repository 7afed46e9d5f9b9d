"""The offline reflection on a long written scene (examples/probes/long/harbour_winter.json, replayed):
an insight is about a thing or a name the lines share, never a number they happen to share ("the
hundred" of "three hundred and forty euro" and "two hundred and sixty behind", "the three" of the
Three Oars and nine thousand litres), and never quotes an earlier insight."""

from __future__ import annotations

from chronicle.simulation.providers.topics import insight, topics

LINES = [
    (1, "Declan said: One thousand three hundred and forty euro from Hanlon Marine in Galway, paid up front."),
    (2, "Nessa said: You're two hundred and sixty behind since October, and the council counts every cent of it."),
    (3, "Nessa said: The tank takes nine thousand litres, and there's about two thousand three hundred in it now."),
    (4, "Declan said: Brendan's brother-in-law told me in the Three Oars that the council's going to shut the harbour."),
    (5, "Ibrahim said: The crack at pile three is forty-two centimetres deep, and the third pile is the worst."),
    (6, "Ibrahim said: I'm here to measure and photograph; the report goes to the council, and they decide."),
    (7, "Nessa keeps coming back to the council: Nessa said “the council counts every cent”."),
]


def test_a_number_two_lines_share_is_no_topic_and_an_insight_quotes_lines_not_insights():
    found = topics(LINES[:6], "Orla")
    named = [topic for topic, _cited in found]
    # What three of them keep coming back to; not a number two lines happen to share.
    assert named == ["the council"], named
    said = insight(found[0][0], dict(LINES), found[0][1], "Orla")
    assert said.startswith("Nessa and Declan keep coming back to the council: ") and said.count("coming back") == 1
    # Once an insight has said it, the topic is not taken up again (no insight quoting an insight).
    assert topics(LINES, "Orla") == []
