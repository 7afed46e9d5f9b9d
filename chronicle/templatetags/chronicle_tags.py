import re

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils.formats import localize
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from chronicle.form_fields import knowledge_rows as _knowledge_rows
from chronicle.writing.analytics import KIND_COLOURS
from chronicle.writing.exports import scene_heading as _scene_heading
from chronicle.writing.wording import filter_sentence as _filter_sentence, kind_label as _kind_label
from urllib.parse import urlencode

register = template.Library()

SEED_BADGES = {"done": ("ok", "memories ready"), "failed": ("bad", "seeding failed"),
               "pending": ("run", "seeding…"), "running": ("run", "seeding…"), "idle": ("", "not seeded")}


@register.filter
def knowledge_rows(value):
    return _knowledge_rows(value)


@register.filter
def get_item(mapping, key):
    """mapping[key] in a template, or None."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def filter_sentence(value) -> str:
    """A recorded search filter in a writer's words."""
    return _filter_sentence(value if isinstance(value, dict) else {})


CARRY_WORDS = {"all": "all they earned", "reflections": "only their insights", "none": "nothing"}


@register.filter
def carry_words(simulation) -> str:
    """A sequel's carry-over in a sentence: "Mira carries all they earned; Oren, only their insights"."""
    try:
        plan = simulation.carry_plan()
    except Exception:  # a plan that no longer parses (the cast changed): said as written
        return simulation.sequel_carry
    if len(set(plan.values())) == 1:
        return f"everyone carries {CARRY_WORDS[next(iter(plan.values()))]} there" if plan else ""
    parts = [f"{name} carries {CARRY_WORDS[mode]}" if i == 0 else f"{name}, {CARRY_WORDS[mode]}"
             for i, (name, mode) in enumerate(plan.items())]
    return "; ".join(parts)


@register.filter
def free_seats(simulation) -> list[str]:
    """The cast members the writer does not play yet (the run page's "Take the seat")."""
    taken = set(simulation.seats or [])
    return [name for name in simulation.cast_names if name not in taken]


@register.filter
def percent(value) -> int:
    """A 0..1 score as a 0..100 bar width (clipped: some components can exceed 1)."""
    try:
        return max(0, min(100, round(float(value) * 100)))
    except (TypeError, ValueError):
        return 0


@register.inclusion_tag("chronicle/_seed_badge.html")
def seed_badge(bank):
    status = bank.seed_status if bank is not None else "idle"
    css, label = SEED_BADGES.get(status, ("", status))
    return {"css": css, "label": label, "status": status}


# A coloured mark per kind of memory (the analytics chart's colours), beside its label: drawn by CSS,
# so it shows on a machine with no emoji font (an emoji there is an empty box).
STAGE_COLOUR = "#e07b00"


@register.filter
def kind_words(kind: str) -> str:
    """A memory kind in words, as plain text (an <option>, an SVG title)."""
    return _kind_label(kind)


@register.simple_tag
def kind_label(kind: str, category: str = "") -> str:
    """A memory's kind in words, its stored name on hover (what the admin and the API call it)."""
    stored = f"{kind}/{category}" if category else kind
    return format_html('<span class="kind-label" title="{}">{}</span>', stored, _kind_label(kind, category or ""))


@register.simple_tag
def kind_icon(kind: str, category: str = "") -> str:
    """A world event or an entrance (a stage direction) has its own mark, else the kind's colour."""
    if kind == "observation" and category == "stage":
        return format_html('<span class="kind-dot stage-dot" style="background:{}"></span>', STAGE_COLOUR)
    return format_html('<span class="kind-dot" style="background:{}"></span>', KIND_COLOURS.get(kind, "#9a9a9a"))


@register.simple_tag
def memory_link(simulation_pk: int, memory_id: int, agent: str = "", from_turn=None) -> str:
    """Where a memory opens on its run's bank page: its agent's memories, its card first (whatever
    page it would fall on), scrolled to. from_turn: the turn (index) the writer came from, to edit
    the memory: its card opens for editing, with a link back to that turn."""

    params = {"agent": agent or "(shared)", "memory": memory_id}
    if from_turn is not None and str(from_turn).isdigit():
        params["from_turn"] = from_turn
    query = urlencode(params)
    return f"{reverse('chronicle_memories', args=[simulation_pk])}?{query}#memory-{memory_id}"


def _svg_number(value) -> str:
    """A coordinate as {{ value }} writes it (str of a float) without the template's per-value cost."""
    text = str(value)
    return text if isinstance(value, (int, float)) and "e" not in text else localize(value)


@register.simple_tag
def svg_bars(bars, prefix: str = "") -> str:
    """A chart's bars (chronicle.writing.charts.Bar), each a <rect> with its hover title: a long run's
    charts hold a few thousand, written here in one join rather than five template lookups each."""
    before = f"{escape(prefix)}, " if prefix else ""
    return mark_safe("".join(
        f'<rect x="{_svg_number(b.x)}" y="{_svg_number(b.y)}" width="{_svg_number(b.width)}" '
        f'height="{_svg_number(b.height)}" fill="{escape(b.colour)}"><title>{before}{escape(b.title)}</title></rect>'
        for b in bars))


@register.simple_tag
def table_rows(rows) -> str:
    """A chart's table body: each row's first cell its heading (a long run's tables hold a thousand cells)."""
    return mark_safe("".join(
        f'<tr><th scope="row">{escape(row[0])}</th>{"".join(f"<td>{escape(cell)}</td>" for cell in row[1:])}</tr>'
        for row in rows if row))


@register.filter
def note_lines(note: str) -> list[str]:
    """A turn's note as its lines (a retried turn can gather several: the page folds all but the first)."""
    return [line for line in (note or "").splitlines() if line.strip()]


@register.inclusion_tag("chronicle/_bank_access.html", takes_context=True)
def bank_access(context, bank, agent: str = ""):
    """A bank's id, with what another program needs to use it: an HTTP API call and an MCP address."""
    request = context.get("request")
    host = request.get_host().split(":")[0] if request is not None else "127.0.0.1"
    origin = request.build_absolute_uri("/").rstrip("/") if request is not None else "http://127.0.0.1:8000"
    return {"bank": bank, "agent": agent or "NAME", "origin": origin, "tokens_url": reverse("api_tokens"),
            "mcp": f"http://{host}:{settings.MCP_PORT}/mcp?bank={bank.pk}&agent={agent or 'NAME'}"
            if settings.MCP_PORT else ""}


_BUSINESS = re.compile(r"\*([^*\n]+)\*")


@register.filter
def stage_business(text) -> str:
    """A line with what is done between asterisks ("*leans in*") set as stage business: italic, the
    asterisks gone; the rest escaped as usual."""
    parts = _BUSINESS.split(str(text or ""))
    out = [escape(part) if i % 2 == 0 else format_html('<em class="business">{}</em>', part.strip())
           for i, part in enumerate(parts)]
    return mark_safe("".join(out))


@register.filter
def slugline(scenario) -> str:
    """The scene's heading, as a screenplay writes it: "INT. ALEX'S APARTMENT - LIVING ROOM - EARLY EVENING"."""
    return _scene_heading(scenario or {}) if (scenario or {}).get("location") or (scenario or {}).get("title") else ""
