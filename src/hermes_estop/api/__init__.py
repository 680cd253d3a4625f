"""The authenticated write API of `hermes serve --http` (issue 36): bearer tokens, the `/api/v1/`
routes (every write through the `Fleet`, the one write path), its OpenAPI description, and the
503 + Retry-After middleware for HTTP-triggered work. Nothing on the check path imports it."""
