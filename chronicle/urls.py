from django.urls import path

from chronicle import views

urlpatterns = [
    path("", views.home, name="home"),
    path("characters/", views.character_list, name="character_list"),
    path("characters/new/", views.character_create, name="character_create"),
    path("characters/validate/", views.character_validate, name="character_validate_new"),
    path("characters/<int:pk>/", views.character_detail, name="character_detail"),
    path("characters/<int:pk>/edit/", views.character_edit, name="character_edit"),
    path("characters/<int:pk>/validate/", views.character_validate, name="character_validate"),
    path("characters/<int:pk>/delete/", views.character_delete, name="character_delete"),
    path("characters/<int:pk>/preview/", views.character_preview, name="character_preview"),
    path("characters/<int:pk>/ask/", views.character_ask, name="character_ask"),
    path("characters/<int:pk>/portrait.png", views.character_portrait, name="character_portrait"),
    path("characters/<int:pk>/export/<str:fmt>/", views.character_export, name="character_export"),
    path("scenarios/", views.scenario_list, name="scenario_list"),
    path("scenarios/new/", views.scenario_create, name="scenario_create"),
    path("scenarios/validate/", views.scenario_validate, name="scenario_validate_new"),
    path("scenarios/pairs/", views.scenario_pairs, name="scenario_pairs"),
    path("scenarios/<int:pk>/", views.scenario_detail, name="scenario_detail"),
    path("scenarios/<int:pk>/edit/", views.scenario_edit, name="scenario_edit"),
    path("scenarios/<int:pk>/validate/", views.scenario_validate, name="scenario_validate"),
    path("scenarios/<int:pk>/delete/", views.scenario_delete, name="scenario_delete"),
    path("scenarios/<int:pk>/preview/", views.scenario_preview, name="scenario_preview"),
    path("scenarios/<int:pk>/export/", views.scenario_export, name="scenario_export"),
    path("import/", views.import_page, name="import"),
]
