from django.apps import AppConfig


class WondaSiteConfig(AppConfig):
    name = "wonda_site"
    verbose_name = "Wonda site"
