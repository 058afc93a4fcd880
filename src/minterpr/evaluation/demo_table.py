"""The README's "What the demo shows" table, made from ``minterpr demo --json``'s file so it cannot drift.

``minterpr demo --json PATH`` writes the headline setting's report with every setting's report under
``settings`` (name -> report); :func:`demo_table` renders them as the README's Markdown table (R@1 per
round, and the system's moves, so a setting named for its questions shows whether it asked any), and
:func:`replace_demo_table` puts it between the README's ``<!-- demo-table -->`` markers
(``python benchmarks/readme_demo_table.py DEMO.json`` does both; tests/test_demo_table.py checks the
README against the committed ``benchmarks/data/demo_results.json``).

Example:
    >>> report = {"rounds": [{"round": 0, "r1": 14.0}, {"round": 1, "r1": 47.0}],
    ...           "moves": {"question": 30, "reference": 70, "none": 0}}
    >>> print(demo_table({"settings": {"info_gain questions + diverse references": report}}))
    | setting | R@1 after the description | round 1 | questions / references asked |
    |---|---|---|---|
    | info_gain questions + diverse references | 14 % | 47 % | 30 / 70 |
"""

from __future__ import annotations

from typing import Any, Mapping

BEGIN, END = "<!-- demo-table -->", "<!-- /demo-table -->"  # the README's markers around the generated table


def demo_table(results: Mapping[str, Any]) -> str:
    """The Markdown table of every setting in ``results`` (``minterpr demo --json``'s object)."""
    settings = results.get("settings")
    if not isinstance(settings, Mapping) or not settings:
        raise ValueError("the demo JSON has no 'settings' (write it with `minterpr demo --json PATH`)")
    rounds = max(len(report["rounds"]) for report in settings.values())
    header = [
        "setting",
        "R@1 after the description",
        *(f"round {r}" if r == 1 else str(r) for r in range(1, rounds)),
        "questions / references asked",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, report in settings.items():
        cells = [f"{report['rounds'][r]['r1']:.0f} %" if r < len(report["rounds"]) else "-" for r in range(rounds)]
        moves = report.get("moves") or {}
        lines.append(
            "| " + " | ".join([name, *cells, f"{moves.get('question', 0)} / {moves.get('reference', 0)}"]) + " |"
        )
    return "\n".join(lines)


def replace_demo_table(readme: str, table: str) -> str:
    """``readme`` with the text between its demo-table markers replaced by ``table``.

    >>> replace_demo_table(f"a\\n{BEGIN}\\nold\\n{END}\\nb", "new")
    'a\\n<!-- demo-table -->\\nnew\\n<!-- /demo-table -->\\nb'
    """
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"the README needs one {BEGIN} ... {END} pair around the demo table")
    head, rest = readme.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}"


def readme_table(readme: str) -> str:
    """The table currently between the README's markers."""
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
