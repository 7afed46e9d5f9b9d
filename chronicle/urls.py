from django.urls import path

from chronicle import views

urlpatterns = [
    path("", views.home, name="home"),
]
