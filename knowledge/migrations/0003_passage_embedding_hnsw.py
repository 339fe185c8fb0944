"""The passages' approximate vector index (``knowledge.search``'s vector leg).

Built ``CONCURRENTLY`` so a tenant's import keeps writing while it builds (hence a non-atomic migration)."""

import pgvector.django
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("knowledge", "0002_citations_content_gaps"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="passage",
            index=pgvector.django.HnswIndex(
                ef_construction=64,
                fields=["embedding"],
                m=16,
                name="passage_embedding_hnsw",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
