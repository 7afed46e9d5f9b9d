from django.apps import AppConfig


class ChronicleConfig(AppConfig):
    name = "chronicle"
    verbose_name = "Chronicle"
