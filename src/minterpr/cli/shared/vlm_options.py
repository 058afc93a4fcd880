"""The ``--vlm-*`` options ``simulate``, ``eval``, ``chat``, ``serve`` and ``vlm caption`` share.

``--vlm-url URL --vlm-model NAME [--vlm-key-env VAR] --vlm-uses reading,asking,anchor,rerank`` plug
in an OpenAI-compatible endpoint (docs/vlm.md); without ``--vlm-url`` nothing changes.
``--vlm-captions FILE|STORE [--vlm-caption-weight W]`` (``simulate``, ``eval``, ``chat``; ``serve
--vlm-captions``: each gallery store's own) searches with the MTG captions' evidence
(:func:`minterpr.vlm.caption.use_captions`); without it nothing changes either.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_vlm_arguments(parser)
    >>> vlm_config(parser.parse_args([])) is None
    True
    >>> vlm_config(parser.parse_args(["--vlm-url", "http://127.0.0.1:8765/v1", "--vlm-model", "m",
    ...                               "--vlm-max-calls", "5000"])).max_calls
    5000
"""

from __future__ import annotations

import argparse
from typing import Any

from minterpr.errors import InputError


def add_vlm_arguments(parser: argparse.ArgumentParser, *, uses: str | None = "reading,asking") -> None:
    """The endpoint options; ``uses`` is --vlm-uses' default (None: a command with one use of its own)."""
    group = parser.add_argument_group("vision-language model (optional; docs/vlm.md)")
    group.add_argument("--vlm-url", metavar="URL", help="an OpenAI-compatible base URL, e.g. http://localhost:11434/v1")
    group.add_argument("--vlm-model", metavar="NAME", help="the model name the server knows")
    group.add_argument("--vlm-key-env", metavar="VAR", help="the NAME of the environment variable holding the API key")
    if uses is not None:
        group.add_argument(
            "--vlm-uses",
            default=uses,
            metavar="USES",
            help=f"comma-separated: reading, asking, anchor, rerank (default: {uses})",
        )
    group.add_argument(
        "--vlm-deadline",
        type=float,
        default=None,
        metavar="S",
        help="longest a turn (or a crop) waits for the model (default: 10)",
    )
    group.add_argument("--vlm-cache", metavar="FILE.json", help="keep the model's answers in FILE across runs")
    group.add_argument(
        "--vlm-max-calls",
        type=int,
        default=None,
        metavar="N",
        help="model calls per session (default: 500), or per `vlm caption` run (5 a crop; default: no limit)",
    )
    group.add_argument(
        "--vlm-max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="prompt + completion tokens per session (default: 500,000), or per `vlm caption` run (default: no limit)",
    )


def vlm_config(args: argparse.Namespace, uses: str | None = None) -> Any:
    """The VLMConfig of the command line, or None without --vlm-url; InputError for half a configuration."""
    url = getattr(args, "vlm_url", None)
    if url is None:
        if getattr(args, "vlm_model", None):
            raise InputError("--vlm-model needs --vlm-url (the endpoint to ask)")
        return None
    if not getattr(args, "vlm_model", None):
        raise InputError("--vlm-url needs --vlm-model (the model name the server knows)")
    from minterpr.vlm.config import VLMConfig, parse_uses

    options: dict[str, Any] = {}
    if args.vlm_deadline is not None:
        options["turn_deadline_s"] = args.vlm_deadline
        options["timeout_s"] = args.vlm_deadline
    for flag, field in (("vlm_max_calls", "max_calls"), ("vlm_max_tokens", "max_total_tokens")):
        if getattr(args, flag, None) is not None:
            options[field] = getattr(args, flag)
    config = VLMConfig(
        url,
        args.vlm_model,
        key_env=args.vlm_key_env,
        uses=parse_uses(uses if uses is not None else args.vlm_uses),
        cache_path=args.vlm_cache,
        **options,
    )
    config.api_key()  # an unset key variable stops the command now (one line naming it), not every turn later
    return config


def add_caption_arguments(parser: argparse.ArgumentParser, *, per_store: bool = False) -> None:
    """--vlm-captions and --vlm-caption-weight: MTG captions' evidence beside the image model's.
    ``per_store`` (serve): a switch for every registered gallery store holding its own captions file."""
    if per_store:
        parser.add_argument(
            "--vlm-captions",
            action="store_true",
            default=None,
            help="search each gallery with the MTG captions stored in its store "
            "(STORE/vlm_captions.jsonl, written by `minterpr vlm caption --index STORE`)",
        )
    else:
        parser.add_argument(
            "--vlm-captions",
            metavar="CAPTIONS.jsonl|STORE",
            help="the gallery's MTG captions (minterpr vlm caption), or a gallery store holding "
            "them: their evidence beside the image model's",
        )
    parser.add_argument(
        "--vlm-caption-weight",
        type=float,
        default=None if per_store else 0.5,
        metavar="W",
        help="weight of the captions' evidence in each captioned slot's probabilities (default 0.5)",
    )


def format_vlm_usage(usage: dict[str, Any]) -> str:
    """One line: the model's calls, tokens, latency and fallbacks (per turn when known)."""
    if usage.get("turns"):
        t = usage["per_turn"]
        return (
            f"vlm: {usage['turns']} turns, per turn {t['calls']:.2f} calls ({t['cached']:.2f} cached, "
            f"{t['fallbacks']:.2f} fell back), {t['tokens']:.0f} tokens, {1000 * t['latency_s']:.1f} ms"
            + (
                f"; {usage['total']['discarded']} phrased questions discarded"
                if usage["total"].get("discarded")
                else ""
            )
        )
    t = usage["total"]
    return (
        f"vlm: {t['calls']} calls ({t['cached']} cached, {t['failed']} fell back), "
        f"{t['prompt_tokens'] + t['completion_tokens']:,} tokens, {t['latency_s']:.1f} s"
    )
