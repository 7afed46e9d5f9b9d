from django.urls import path

import chronicle.converters  # noqa: F401  (registers <turn:…>, a turn's number from 1)
from chronicle.simulation.pages import seat_views, views

urlpatterns = [
    path("", views.simulation_list, name="simulation_list"),
    path("new/", views.simulation_create, name="simulation_create"),
    path("demo/", views.simulation_demo, name="simulation_demo"),
    path("test-connection/", views.simulation_test_connection, name="simulation_test_connection"),
    path("<int:pk>/", views.simulation_detail, name="simulation_detail"),
    path("<int:pk>/llm/", views.simulation_llm, name="simulation_llm"),
    path("<int:pk>/delete/", views.simulation_delete, name="simulation_delete"),
    path("<int:pk>/replay/", views.simulation_replay, name="simulation_replay"),
    path("<int:pk>/stage/", views.simulation_stage, name="simulation_stage"),
    path("<int:pk>/seat/", seat_views.seat_change, name="seat_change"),
    path("<int:pk>/seat/line/", seat_views.seat_line, name="seat_line"),
    path("<int:pk>/seat/search/", seat_views.seat_search, name="seat_search"),
    path("<int:pk>/seat/suggest/", seat_views.seat_suggest, name="seat_suggest"),
    path("<int:pk>/turns/<turn:index>/", views.turn_detail, name="simulation_turn"),
]
