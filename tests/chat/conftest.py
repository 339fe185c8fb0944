"""Chat fixtures live in tests/conftest.py (fake_ollama is shared with the health tests)."""
