from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from api import views as api_views
from api.api import urls as api_urls
from memory import views as memory_views
from wonda_site import metrics, views

admin.site.site_header = "Wonda memory inspection"
admin.site.site_title = "Wonda admin"
admin.site.enable_nav_sidebar = False  # its 300 px squeezed the memory list's content column at 1366 px

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on every page whatever the page links.
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("img/favicon.svg"), permanent=True))),
    path("metrics", metrics.metrics, name="metrics"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api_urls()),
    path("settings/tokens/", api_views.tokens, name="api_tokens"),
    path("settings/tokens/<int:pk>/revoke/", api_views.token_revoke, name="api_token_revoke"),
    path("admin/integrity/", memory_views.integrity, name="memory_integrity"),
    path("admin/", admin.site.urls),
    path("simulations/", include("chronicle.simulation.pages.urls")),
    path("chronicle/", include("chronicle.writing.urls")),
    path("", include("chronicle.urls")),
]
