"""Whether this command speaks to a server (`--server` / $HERMES_ESTOP_SERVER), asked without
importing the remote client when no server is named: `hermes check`, `gate` and `history`
run from crontab lines and stay cheap."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module stays cheap to import
if TYPE_CHECKING:  # pragma: no cover
    from hermes_estop.cli.remote import Remote

__all__ = ["remote_if_named"]


def remote_if_named() -> Remote | None:
    """The server `--server` / $HERMES_ESTOP_SERVER names, or None (this host's store). The
    remote client is imported only when there is one (`--server` on the command line has
    imported it already)."""
    if not os.environ.get("HERMES_ESTOP_SERVER") and "hermes_estop.cli.remote" not in sys.modules:
        return None
    from hermes_estop.cli.remote import chosen_server

    return chosen_server()
