"""What several test modules share, kept out of collection (pytest collects ``test_*.py`` only):
``support.helpers`` (random attributes, small galleries, the tiny model, ../shared/data),
``support.serving`` (the service tests' world), ``support.web`` (the browser tests' server),
``support.datasets`` (tiny training and converter inputs). Fixtures stay in ``tests/conftest.py``;
test modules import these, never each other."""
