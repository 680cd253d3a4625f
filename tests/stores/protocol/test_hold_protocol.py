"""Issue 22: every interleaving of 2 and 3 actors of the file store's hold protocol, up to a
bound on preemptions plus one crash (a kill, or a power loss keeping only what was fsync'ed)
injected before any step, checked against the invariants of `checker.py` in every state; and
the checker catching the audit-ordering defect of issue 20 (the mutation suite is
test_protocol_mutations.py).

The bound here keeps the module to under a minute on 2 loaded cores (its actors are greenlets); a larger bound:
`python bench/protocol_check.py --bound 3`."""

from __future__ import annotations

from datetime import timedelta

import pytest
import variants
from checker import (
    ActorSpec,
    Scenario,
    deadman_read,
    explore,
    fenced_retire,
    judged_release,
    plain_read,
    rearm,
    release,
    replay,
    window,
)

from hermes_estop.stores.file import FileStore

LATER = timedelta(hours=1)  # past the initial hold's 10-minute deadman, inside a re-arm's 2 hours

#: (scenario, bound): every pair at bound 2, the triples at bound 1
SCENARIOS = [
    (Scenario("re-arm | read", [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)]), 2),
    (Scenario("re-arm | release", [ActorSpec("operator", rearm), ActorSpec("releaser", release)]), 2),
    (Scenario("re-arm | judged lift", [ActorSpec("operator", rearm), ActorSpec("lifter", judged_release)]), 2),
    (Scenario("re-arm | deadman read", [ActorSpec("operator", rearm), ActorSpec("deadman", deadman_read, LATER)]), 2),
    (Scenario("re-arm | fenced retire", [ActorSpec("operator", rearm), ActorSpec("retirer", fenced_retire)]), 2),
    (Scenario("window arm+retire | re-arm", [ActorSpec("window", window), ActorSpec("operator", rearm)], None), 2),
    (Scenario("engage | engage (home)", [ActorSpec("a", rearm), ActorSpec("b", rearm)], None, "profiles/ops"), 2),
    (Scenario("first engage | read", [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)], None), 2),
    (Scenario("re-arm | deadman read | read", [ActorSpec("operator", rearm), ActorSpec("deadman", deadman_read, LATER),
                                                ActorSpec("reader", plain_read, LATER)]), 1),
    (Scenario("re-arm | re-arm | fenced retire", [ActorSpec("a", rearm), ActorSpec("b", rearm),
                                                   ActorSpec("retirer", fenced_retire)]), 1),
]


@pytest.mark.parametrize(("scenario", "bound"), SCENARIOS, ids=[s.name for s, _ in SCENARIOS])
def test_the_hold_protocol_keeps_every_invariant_in_every_interleaving(scenario, bound, tmp_path, capsys):
    result = explore(scenario, tmp_path, bound, FileStore)
    with capsys.disabled():
        print(f"\n  {result.summary()}")
    assert result.violation is None, result.violation.describe()
    assert result.executions > 100 and result.crashed > 0


READ_DURING_REARM = Scenario("re-arm | read", [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)])



def test_the_write_then_audit_order_is_caught_and_replays(tmp_path):
    """Issue 20 item 5's defect: a body renamed in before its audit line (killed there, a
    generation stands that no line names)."""
    result = explore(READ_DURING_REARM, tmp_path / "explore", 2, variants.WriteThenAudit)
    assert result.violation is not None and result.violation.invariant == 4, result.summary()
    schedule = [step.taken for step in result.violation.schedule]
    again = replay(READ_DURING_REARM, tmp_path / "replay", schedule, variants.WriteThenAudit)
    assert again.violation is not None and again.violation.invariant == 4
    assert [step.what.split(": ")[0] for step in again.trace] == [step.what.split(": ")[0] for step in result.violation.schedule]
    assert "rename" in result.violation.schedule[-1].what
    assert "1. ('run', 0)" in result.violation.describe()


def test_the_protocol_modules_reach_the_disk_only_through_the_os_layer():
    """The checker models the `os`, `fcntl` and `time` names of these modules; a call that reaches
    the disk another way (a `Path` method, `os.path`, the builtin `open`) would escape the model
    and let the checker prove a protocol that is not the one that runs. Creating directories is
    allowed: the checker's directories exist on disk too."""
    import re
    from pathlib import Path

    import hermes_estop

    package = Path(hermes_estop.__file__).parent
    escape = re.compile(r"\.(write_bytes|read_bytes|write_text|read_text|unlink|rename|replace|exists|stat|lstat|"
                        r"is_file|touch|chmod|iterdir|glob)\(|os\.path\.|(?<![.\w])open\(|shutil|os\.fdopen")
    allowed = {("audit_log.py", "with os.fdopen(fd, \"rb\") as handle:")}  # history's reader, not the protocol
    found = []
    for name in ("stores/file.py", "system/fsutil.py", "system/fsread.py", "stores/audit_log.py"):
        for line in (package / name).read_text().splitlines():
            code = line.split("#")[0]
            for match in escape.finditer(code):
                if match.group(0).startswith(".") and code[:match.start()].endswith("os"):
                    continue  # os.open / os.lstat / os.rename...: the layer itself
                if (Path(name).name, line.strip()) not in allowed:
                    found.append(f"{name}: {line.strip()}")
    assert not found, "calls that bypass the OS layer:\n" + "\n".join(found)
