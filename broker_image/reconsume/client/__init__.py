"""The Python client: routes, producer, push consumer and admin client (asyncio first)."""
