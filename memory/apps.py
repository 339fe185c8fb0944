from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = _("Memory")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory import labels  # the models are loaded only now
        from memory.embeddings.base import check_retired_settings
        from memory.recall.tuning import tuning

        labels.apply()
        check_retired_settings()
        # MEMDESK_RECALL checked like input: an unknown or mistyped knob stops the process here, naming it.
        tuning()
