from django.apps import AppConfig


class WondaSiteConfig(AppConfig):
    name = "wonda_site"
    verbose_name = "Wonda site"

    def ready(self):
        from core import tracing

        tracing.configure()  # OTLP spans when OTEL_EXPORTER_OTLP_ENDPOINT is set; off otherwise
