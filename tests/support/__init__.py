"""What several test modules share, kept out of collection (pytest collects ``test_*.py`` only):
``support.helpers`` (random attributes, small galleries, the tiny model, ../shared/data),
``support.serving`` (the service tests' world), ``support.web`` (the browser tests' server),
``support.browser`` (their Playwright and chromium), ``support.datasets`` (tiny training and converter
inputs). Fixtures any module may use stay in ``tests/conftest.py``; those a few modules import live
beside their helpers (``support.tuning``, ``support.browser``). Test modules import these, never each other."""
