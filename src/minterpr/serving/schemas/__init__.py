"""The typed requests and responses (pydantic) of the API and the pages, one module per area."""
