from django.urls import path

import chronicle.converters  # noqa: F401  (registers <turn:…>, a turn's number from 1)
from chronicle.writing import bank_views, views

urlpatterns = [
    path("import/", views.simulation_import, name="chronicle_import"),
    path("<int:pk>/", views.chronicle_review, name="chronicle_review"),
    path("<int:pk>/lines/<turn:index>/", views.line_update, name="chronicle_line"),
    path("<int:pk>/turns/<turn:index>/", views.turn_inspect, name="turn_inspect"),
    path("<int:pk>/turns/<turn:index>/override/", views.turn_override, name="turn_override"),
    path("<int:pk>/turns/<turn:index>/regenerate/", views.turn_regenerate, name="turn_regenerate"),
    path("<int:pk>/replay-undistorted/", views.replay_undistorted, name="replay_undistorted"),
    path("<int:pk>/memories/", bank_views.memory_list, name="chronicle_memories"),
    path("<int:pk>/memories/new/", bank_views.memory_form, name="chronicle_memory_form"),
    path("<int:pk>/memories/consolidate/", bank_views.memory_consolidate, name="chronicle_memory_consolidate"),
    path("<int:pk>/memories/prune/", bank_views.memory_prune, name="chronicle_memory_prune"),
    path("<int:pk>/memories/reach/", bank_views.memory_reach, name="chronicle_memory_reach"),
    path("<int:pk>/memories/<int:memory_id>/", bank_views.memory_update, name="chronicle_memory"),
    path("<int:pk>/memories/<int:memory_id>/links/", bank_views.memory_links, name="chronicle_memory_links"),
    path("<int:pk>/analytics/", bank_views.simulation_analytics, name="chronicle_analytics"),
    path("<int:pk>/map/", bank_views.bank_map, name="chronicle_map"),
    path("<int:pk>/history/", views.edit_history, name="chronicle_history"),
    path("<int:pk>/history/<int:edit_id>/undo/", views.edit_undo, name="chronicle_undo"),
    path("<int:pk>/compare/", views.branch_compare, name="chronicle_compare"),
    path("<int:pk>/export.<str:fmt>", views.chronicle_export, name="chronicle_export"),
]
