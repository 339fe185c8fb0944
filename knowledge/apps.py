from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = _("Knowledge")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from knowledge import labels  # the models are loaded only now

        labels.apply()
