"""What an operator sees of a fleet: the status document (`status.FleetStatus`: `hermes status`,
/api/status, /metrics, the status page and serve's shutdown line are renderings of one build),
served by `hermes serve --http` as Prometheus metrics, the JSON status, and a status page with
the week's timeline; and the same timeline in a terminal (`hermes windows timeline`).
Read-only: nothing here writes a hold. `gate()` and the consumers never pay for it.

The package re-exports nothing: `hermes status` needs `status` alone, and importing the HTTP
server, Prometheus and rich with it cost that command about 0.1 s of its start-up. The modules:
`status` (the document), `view` (the timeline model: `Observer`), `metrics`, `server`
(`StatusServer`, `HttpService`), `page`, `svg` and `terminal` (its renderings).
"""

