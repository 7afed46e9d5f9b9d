from django.contrib import admin
from django.urls import include, path

from wonda_site import views

admin.site.site_header = "Wonda memory inspection"
admin.site.site_title = "Wonda admin"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("simulations/", include("chronicle.simulation.urls")),
    path("chronicle/", include("chronicle.writing.urls")),
    path("", include("chronicle.urls")),
]
