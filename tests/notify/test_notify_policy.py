"""Break glass is notified (issue 37): an `--override` write reaches a target that asks for
`override` events, with the actor, the reason and the rule; a refusal reaches one asking for
`refused`."""

from __future__ import annotations

import pytest
from notify_helpers import Receiver, webhook, write_config

from hermes_estop import Estop
from hermes_estop.model.policy import PolicyRefused
from hermes_estop.notify.notifier import build_workers


def test_an_override_and_a_refusal_are_notified(estop: Estop, receiver: Receiver) -> None:
    write_config(estop.layout.root, webhook("pager", receiver.url, events=["override", "refused"]),
                 '[policy]\nmax_ttl = "1h"\n')
    [worker] = build_workers(estop.fleet)
    worker.tick(estop.clock())
    with pytest.raises(PolicyRefused):
        estop.engage(reason="long", ttl="3h")
    estop.engage(reason="long", ttl="3h", override="INC-7 on fire")
    report = worker.tick(estop.clock())
    assert report.error is None
    got = [(e["event"], e["reason"], e["actor"]) for e in receiver.events()]
    assert got == [("refused", "long", "tester"), ("override", "INC-7 on fire", "tester")]
    assert "max_ttl" in receiver.events()[1]["detail"]
