"""How the dry run's characters put things: a manner read off the sheet (blunt, warm or plain), the
things a text talks about ("the harbour office", "Bella's") to react to or ask after, and the
wordings each manner has for a reaction, a question, a nudge to someone quiet."""

from __future__ import annotations

import re

# Words of a sheet that say how someone talks: a blunt one is short with people, a warm one open.
_BLUNT = set("""blunt direct terse dry gruff brisk curt impatient pragmatic efficient decisive stern sharp
suspicious wary sceptical skeptical cynical guarded practical no-nonsense precise matter-of-fact
short structured tired bitter proud stubborn""".split())
_WARM = set("""warm friendly kind gentle generous chatty enthusiastic spontaneous passionate cheerful
funny lively affectionate sweet playful bubbly easily excited open caring considerate loving
hospitable sociable talkative""".split())


def manner(text: str) -> str:
    """ "blunt", "warm" or "plain", by which of the sheet's words say more."""
    found = re.findall(r"[a-z][a-z-]+", (text or "").lower())
    blunt, warm = sum(w in _BLUNT for w in found), sum(w in _WARM for w in found)
    return "blunt" if blunt > warm else "warm" if warm > blunt else "plain"


# Words that end a thing's name: "the harbour office of …", "the cost before …".
_STOP = set("""of in on at to with by for from about as into than that who whom which and or but nor is are was
were be been being has have had will would can could should may might must do does did this these those a an the
my your his her their its our me him them us it when while if because before after over under near around
since until so not no just also very really only still even ever always never often every each behind across
through within without against between beside inside outside along among during toward towards up down off out
away back tonight today tomorrow open closed shut ready safe busy quiet relaxed alive again too got get gets
getting going coming made said went come go seems looks feels together apart""".split())
_VAGUE = set("""one ones others other same way time rest end kind sort lot bit thing things something way
first last whole people""".split())
_DETERMINER = re.compile(r"^(?:the|a|an|his|her|their)$", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z][\w'’-]*|[^\w\s]")


def things(text: str, names: set[str] = frozenset(), *, yours: bool = False, any_article: bool = False,
           proper: bool = True) -> list[str]:
    """What a text talks about, as one would name it in a line: "the new Italian place", "Bella's",
    "Italian food". A possessive of the one it is about becomes "your" where `yours`, else "the"; a
    thing named with "a" counts where `any_article` (a room's "a wood stove"; "a little impatient" in
    what one knows of someone is how they are, not a thing they have). A name alone ("Bella's") counts
    where `proper` (not in a room: one does not glance at "Amsterdam")."""
    tokens = _TOKEN.findall(text or "")
    found: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        start = i == 0 or tokens[i - 1] in ".!?;:“\"("
        # "Alex is the friend who…" describes Alex: no thing to ask Alex about.
        described = i > 0 and tokens[i - 1].lower() in ("is", "was", "are", "were", "be", "being")
        if _DETERMINER.match(token) and (any_article or token.lower() not in ("a", "an")):
            j, taken = i + 1, []
            while j < len(tokens) and len(taken) < 4 and tokens[j][0].isalpha() and tokens[j].lower() not in _STOP \
                    and tokens[j] not in names:
                taken.append(tokens[j])
                j += 1
            if len(taken) > 1 and taken[-1].endswith("ed"):
                taken.pop()  # "the converted barge moored": the thing, not what was done to it
            if len(taken) == 1 and re.search(r"(?:ed|ful|ous|ive|ish|able|ible)$", taken[0].lower()):
                taken.pop()  # "the organised, warm-hearted pianist" cut at its comma: a describing word
            if taken and not described and taken[-1].lower() not in _VAGUE and not taken[-1].endswith("ly") and len(taken[-1]) > 2:
                own = yours and token.lower() not in ("the", "a", "an")
                found.append(("your " if own else "the ") + " ".join(taken))
            i = max(j, i + 1)
            continue
        if proper and token[0].isupper() and not start and re.sub(r"['’]s$", "", token) not in names \
                and not re.match(r"I['’]", token) and token != "I" and token.lower() not in _STOP:
            j, taken = i, []
            while j < len(tokens) and tokens[j][0].isupper() and tokens[j] not in names:
                taken.append(tokens[j])
                j += 1
            if j < len(tokens) and tokens[j][0].islower() and tokens[j] not in _STOP and len(taken) == 1 \
                    and re.search(r"(?:an|ish|ese|ch|ic)$", taken[0]):
                taken.append(tokens[j])  # "Italian food": a describing name and its thing
                j += 1
            found.append(" ".join(taken))
            i = j
            continue
        i += 1
    return list(dict.fromkeys(f for f in found if len(f) > 3))


# {t}: the thing, {T}: the same capitalised, {to}: whom one answers, {o}: someone else present,
# {w}: what one wants ("keep the inn open"), {v}: what matters to one.
AGREE = {
    "blunt": ["{T}, yes.", "Right. {T} works.", "Fine by me: {t}."],
    "warm": ["Oh, {t}! I love that.", "{T}, yes, that sounds lovely.", "Ooh, {t}. Now you're talking."],
    "plain": ["{T} sounds good to me.", "I like the idea of {t}.", "{T}? I could go for that."],
}
DOUBT = {
    "blunt": ["{T}? I'm not sold.", "{T}. Why?", "{T}? Hardly."],
    "warm": ["Hm, {t}? I'm not sure, but go on.", "{T}? Tell me more, {to}.", "Oh, {t}? I didn't see that coming."],
    "plain": ["{T}? Maybe.", "I'm not sure about {t}.", "{T}? I don't know about that."],
}
WARY = {
    "blunt": ["Leave {t} out of it.", "Never mind {t}."],
    "warm": ["Oh, let's not talk about {t}.", "Can we not get into {t} tonight?"],
    "plain": ["I'd rather not get into {t}.", "Let's leave {t} for now."],
}
HEARD = {  # a line with nothing to take hold of
    "blunt": ["Okay, {to}.", "Noted.", "Fair enough.", "If you say so."],
    "warm": ["Oh, {to}.", "Aw, {to}.", "I hear you, {to}.", "Ha, fair enough, {to}."],
    "plain": ["I see, {to}.", "Mm, {to}.", "Right, {to}.", "Fair point, {to}."],
}
YES = {  # a yes-or-no question that meets what one wants
    "blunt": ["Yes, {to}.", "Sure.", "Fine, {to}. Yes."],
    "warm": ["Oh, yes, {to}!", "Absolutely, {to}.", "I think so, {to}, yes."],
    "plain": ["Yes, {to}.", "I think so, {to}.", "That's fine by me, {to}."],
}
NO = {  # one that does not
    "blunt": ["No, {to}.", "Not yet.", "Doubt it, {to}."],
    "warm": ["Hmm, I'm not sure, {to}.", "Oh, I don't know, {to}.", "Maybe later, {to}."],
    "plain": ["Maybe, {to}.", "Not yet, {to}.", "I'm not sure, {to}."],
}
EASY = {  # asked what one would do, having said what one wants already
    "blunt": ["Whatever's quickest, {to}.", "Something simple. No fuss.", "I'd stop talking and decide."],
    "warm": ["Anything, {to}, as long as we're together.", "Something fun! I'm easy.",
             "Whatever makes everyone happy, {to}."],
    "plain": ["Something we can all agree on, {to}.", "I'm easy, as long as it's fair.", "Something simple, I think."],
}
UNSURE = {  # a question one has no answer to
    "blunt": ["No idea, {to}.", "Don't ask me, {to}.", "Can't say, {to}."],
    "warm": ["Oh, I honestly don't know, {to}.", "Good question, {to}. I'm not sure."],
    "plain": ["I don't know yet, {to}.", "Hard to say, {to}.", "I'm not sure, {to}."],
}
WANT = {  # what one wants, put to the others
    "blunt": ["We should {w}.", "Let's just {w}.", "I want to {w}. Simple as that.", "Can we {w}, please?"],
    "warm": ["I'd really love for us to {w}.", "Wouldn't it be nice to {w}?", "Honestly, I just want to {w}.",
             "Let's {w}, all of us."],
    "plain": ["I'd like us to {w}.", "Could we {w}?", "What I'd like is to {w}.", "I think we should {w}."],
}
ASK_ABOUT = {  # a question about something of the one spoken to
    "blunt": ["{to}, what about {t}?", "And {t}, {to}?", "{to}, where are you on {t}?"],
    "warm": ["{to}, I've been meaning to ask about {t}.", "Tell me about {t}, {to}.", "{to}, I keep wondering about {t}."],
    "plain": ["{to}, what do you make of {t}?", "{to}, what's the story with {t}?", "How about {t}, {to}?"],
}
QUIET = {  # turning to someone else present who has said nothing lately
    "blunt": ["{o}, you're quiet. Speak up.", "Nothing from you, {o}?"],
    "warm": ["{o}, you've gone quiet on us.", "{o}, I'd love to hear from you too."],
    "plain": ["You're quiet, {o}. What would you pick?", "We haven't heard from you, {o}."],
}
TURN_TO = {  # turning to someone else present
    "blunt": ["{o}? Your call.", "{o}, yes or no?", "{o}, you decide."],
    "warm": ["What about you, {o}?", "{o}, what do you reckon?", "{o}, help me out here."],
    "plain": ["{o}, what do you think?", "{o}, would that work for you?", "And you, {o}?"],
}
PLAN = {  # asking the one spoken to what they would do
    "blunt": ["So what do you want, {to}?", "{to}, what's your plan?", "Your move, {to}."],
    "warm": ["{to}, what would make tonight perfect for you?", "What are you hoping for, {to}?",
             "{to}, tell me what you'd really like."],
    "plain": ["What would you do, {to}?", "{to}, what would you pick?", "So what do you want to do, {to}?"],
}
MISSING = {  # someone who was here a moment ago
    "blunt": ["Where's {o} got to?", "{o} picked a fine time to leave."],
    "warm": ["I hope {o} is all right.", "I miss {o} already."],
    "plain": ["I wonder what's keeping {o}.", "{o} should be back soon."],
}
FOLLOW = {  # taking up what was just said
    "blunt": ["Why {t}, {to}?", "What's {t} got to do with it?", "And {t}? Explain."],
    "warm": ["Tell me more about {t}, {to}.", "I'm glad you brought up {t}.", "Wait, {t}? Go on, {to}."],
    "plain": ["Say more about {t}, {to}.", "What about {t}, exactly?", "Back to {t} for a moment."],
}
VALUE = {
    "blunt": ["I care about {v}. That's all.", "{V} matters here."],
    "warm": ["You know me, {to}: {v} means a lot to me.", "For me it's about {v}, really."],
    "plain": ["{V} matters to me, {to}.", "For me it comes down to {v}."],
}
LOOK = ["*glances at {t}*", "*looks over at {t}*", "*nods toward {t}*"]


def fill(template: str, **parts: str) -> str:
    """A wording with its parts in, capitalised where a part opens it."""
    upper = {k.upper(): v[:1].upper() + v[1:] for k, v in parts.items() if len(k) == 1 and k.upper() not in parts}
    return template.format(**parts, **upper)
