"""The JSON API's routers, one module per area (search, jobs, admin, metrics)."""
