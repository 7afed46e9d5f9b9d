"""Chronicle pages. One module per noun; the URLconf imports from here."""

from chronicle.views.cards import character_export, import_page, scenario_export
from chronicle.views.characters import (character_ask, character_portrait, character_create, character_delete, character_detail,
                                        character_edit, character_list, character_preview, character_validate)
from chronicle.views.home import home
from chronicle.views.scenarios import (scenario_create, scenario_delete, scenario_detail, scenario_edit,
                                       scenario_list, scenario_pairs, scenario_preview, scenario_validate)

__all__ = [
    "home", "character_list", "character_create", "character_edit", "character_detail", "character_delete",
    "character_preview", "character_ask", "character_portrait", "character_validate", "scenario_list", "scenario_create",
    "scenario_edit", "scenario_detail", "scenario_delete", "scenario_preview", "scenario_pairs",
    "scenario_validate", "import_page", "character_export", "scenario_export",
]
