"""The conversation's language: the attribute ontology, phrasing and reading of sentences, dialogue acts
and what a parsed fact says about an image (:mod:`minterpr.language.evidence`).

Plain Python and numpy, below every other package but the root modules (types, errors, fileio,
registry): datasets, models, indexes and sessions all speak it.

Example:
    >>> from minterpr.language.text_parser import parse_facts
    >>> [f.slot for f in parse_facts("a woman with a red backpack")][:1]
    ['gender']
"""
