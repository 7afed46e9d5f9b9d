"""Reading what a turn's model was sent, for tests."""


def sent_text(turn) -> str:
    """The system message and the user messages of the turn's prompt (the conversation as the model read it)."""
    return "\n\n".join(m.get("content") or "" for m in turn.prompt_messages or [] if m.get("role") in ("system", "user"))


def last_user(turn) -> str:
    """The last user message before the model's first reply: who is here, the time and the ask."""
    users = [m.get("content") or "" for m in turn.prompt_messages or [] if m.get("role") == "user"]
    return users[-1] if users else ""


def given_text(turn) -> str:
    """What the agent was given besides the transcript: the system message, the memories that came
    back before its turns, what the writer pinned, the header and the ask (by the parts the turn's
    context view records for its first call)."""
    messages = turn.prompt_messages or []
    sections = ((turn.context or {}).get("calls") or [{}])[0].get("sections") or []
    pieces = [messages[0].get("content") or ""] if messages else []
    for section in sections:
        ref = section.get("ref")
        if isinstance(ref, list) and len(ref) == 3 and ref[0] > 0 and section.get("kind") != "transcript":
            pieces.append((messages[ref[0]].get("content") or "")[ref[1]:ref[2]])
    return "\n\n".join(pieces)
