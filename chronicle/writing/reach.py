"""Whether a run's agents can reach a memory the writer forms, and the warning Form a memory shows when
they cannot (re-exported by chronicle.writing.selectors)."""

from __future__ import annotations

from dataclasses import dataclass

from chronicle.simulation.turn.briefing import PREPOPULATED_FACT_KINDS
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from memory.api import tools_offered


# --- reach: can the agent get a memory the writer forms? ----------------------------------------
#
# A memory the writer forms has no category, `about` or participants, so it is returned only by a
# tool (or pre-populated section) whose filter asks for its kind and nothing narrower. Each entry:
# the kinds, and whose memories — "own" (the agent's), "shared" (the agent's and everyone's, agent
# ""), "everyone" (only agent ""), "any" (anybody's). The tools that also filter by category
# (query_background, query_communication_style), `about` (query_character) or participant
# (recall_interactions) never return one, nor do the write tools. tests/chronicle/writing/
# test_reach_warning.py runs every tool and the pre-population and checks their filters against
# these tables, so a change to memory.recalling.tools or the engine that they miss fails there.
TOOL_REACH: dict[str, tuple[tuple[str, ...], str]] = {
    "query_self": (("character",), "shared"),
    "query_scene": (("scene",), "any"),
    "query_memory": (tuple(tools_offered.QUERY_MEMORY_KINDS), "shared"),
    "recall_episodes": (("episodic", "observation", "action"), "own"),
    "recall_facts": (("semantic", "character_knowledge", "reflection"), "shared"),
    "check_similar_situations": (("episodic", "observation", "action", "reflection", "procedural"), "own"),
}
# engine.prepopulate's sections, by title (the others present: filtered by `about`).
PREPOPULATE_REACH: dict[str, tuple[tuple[str, ...], str]] = {
    "Who you are": (("character",), "shared"),
    "More about you": (("character",), "own"),
    "Where you are": (("scene",), "shared"),
    "What you know": (tuple(PREPOPULATED_FACT_KINDS), "shared"),
    "Recent events": (("episodic", "observation", "action"), "shared"),
}
_WHOSE_REACHES = {"own": {"own"}, "shared": {"own", "everyone"}, "everyone": {"everyone"}, "any": {"own", "everyone"}}


@dataclass
class Reach:
    """What the agents of a run can get of a writer's memory: `ways[(kind, whose)]` names the offered
    tools and pre-populated sections that return it (whose: "own" for an agent's, "everyone" for shared)."""

    mode: str
    tools: list[str]
    ways: dict[tuple[str, str], list[str]]

    def warning(self, kind: str, agent: str) -> str:
        """"" when the memory is reachable, else why not and what would reach it, in the writer's words."""
        whose = "own" if agent else "everyone"
        if self.ways.get((kind, whose)):
            return ""
        label = dict(Memory.Kind.choices).get(kind, kind)
        who = f"{agent}'s" if agent else "a shared"
        tools = [name for name, (kinds, reach) in TOOL_REACH.items()
                 if kind in kinds and whose in _WHOSE_REACHES[reach] and name not in self.tools]
        sections = [title for title, (kinds, reach) in PREPOPULATE_REACH.items()
                    if kind in kinds and whose in _WHOSE_REACHES[reach]]
        fixes = []
        if tools:
            fixes.append(f"offer {' or '.join(tools)}" if self.mode != "prepopulate"
                         else f"use the “Both” retrieval mode with {' or '.join(tools)} offered")
        if sections and self.mode == "tools":
            fixes.append(f"use the “Both” retrieval mode (pre-population “{sections[0]}”)")
        advice = (" To reach it, " + ", or ".join(fixes) + " when you start a run; or pick another kind or owner."
                  if fixes else " Pick another kind or owner.")
        return (f"Unreachable: no agent would ever get {who} “{label}” memory in this run "
                f"(retrieval mode {self.mode}; tools offered: {', '.join(self.tools) or 'none'}).{advice}")

    def unreachable(self) -> list[tuple[str, str]]:
        return [(kind, whose) for kind in Memory.Kind.values for whose in ("own", "everyone")
                if not self.ways.get((kind, whose))]


def reach(simulation: Simulation) -> Reach:
    """Which kinds of writer-formed memory the run's agents can get, with its tool set and mode,
    as the engine offers them (turn_inputs.turn_input and engine._converse)."""
    mode = simulation.retrieval_mode
    if simulation.tools_unsupported and mode != Simulation.RetrievalMode.PREPOPULATE:
        mode = Simulation.RetrievalMode.PREPOPULATE  # the model refused tools: the engine fell back
    chosen = set(simulation.tool_set or [])
    tools = [n for n in tools_offered.SIMULATION_TOOLS if n in chosen] \
        if mode in ("tools", "both") and simulation.max_tool_calls > 0 else []
    sources = [(name, TOOL_REACH[name]) for name in tools if name in TOOL_REACH]
    if mode in ("prepopulate", "both"):
        sources += [(f"pre-population “{title}”", entry) for title, entry in PREPOPULATE_REACH.items()]
    ways: dict[tuple[str, str], list[str]] = {}
    for name, (kinds, whose) in sources:
        for kind in kinds:
            for owner in _WHOSE_REACHES[whose]:
                ways.setdefault((kind, owner), []).append(name)
    return Reach(mode=mode, tools=tools, ways=ways)
