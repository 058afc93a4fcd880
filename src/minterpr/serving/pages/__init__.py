"""The server-rendered pages, one module per area (search, ingestion)."""
