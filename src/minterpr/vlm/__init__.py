"""Bring your own vision-language model: an optional backend over an OpenAI-compatible endpoint.

minterpr converses without any language model; this package lets a user who runs Ollama, vLLM,
llama.cpp's server, LM Studio or a hosted API plug one in (docs/vlm.md). Nothing here is imported
by the default path, and every use falls back to the rule-based behaviour when the endpoint fails,
times out, runs out of budget or answers nonsense.

- :mod:`~minterpr.vlm.config`: :class:`VLMConfig` (URL, model, API-key environment variable, uses,
  deadlines, budget) and the registry of uses;
- :mod:`~minterpr.vlm.client`: the chat-completions client (images as data URLs, JSON-schema
  output, retries, budget, cache, a record of every call);
- :mod:`~minterpr.vlm.transport`: the connection pool clients share and timeouts counting down to one deadline;
- :mod:`~minterpr.vlm.protocol`: the request body (spliced from pieces encoded once) and the answer's text;
- :mod:`~minterpr.vlm.schema`: the ontology as JSON schemas (and their strict-mode form), validated
  parsing of answers, model text made safe to show;
- :mod:`~minterpr.vlm.assist`: the uses a session calls (reading, asking, anchor, rerank);
- :mod:`~minterpr.vlm.caption`: MTG at ingestion (captions and per-slot evidence per crop);
- :mod:`~minterpr.vlm.testing`: a scripted local server speaking the protocol (tests, benchmarks).
"""
