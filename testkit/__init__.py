"""Test doubles shared by the tests and the benchmarks, so that neither imports the other.

``testkit.fake_ollama`` is the only fake memdesk allows: a real HTTP server speaking Ollama's protocol, to
which the product's own client talks.
"""
