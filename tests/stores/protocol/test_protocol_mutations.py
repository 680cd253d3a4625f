"""The mutation suite (issue 32 item 12): each known-wrong variant of the file store's hold
protocol (`variants.py`) must make the checker (`checker.py`) fail, with the invariant it
breaks. A variant the checker lets pass means an invariant is missing: that is how a release
done without `.ESTOP.lock` once passed all the protocol tests."""

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
)

LATER = timedelta(hours=1)  # past the initial hold's 10-minute deadman, inside a re-arm's 2 hours

READ_DURING_REARM = Scenario("re-arm | read", [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)])
RETIRE_DURING_REARM = Scenario("re-arm | fenced retire", [ActorSpec("operator", rearm), ActorSpec("retirer", fenced_retire)])
DEADMAN_DURING_REARM = Scenario("re-arm | deadman read",
                                [ActorSpec("operator", rearm), ActorSpec("deadman", deadman_read, LATER)])
RELEASE_DURING_REARM = Scenario("re-arm | release", [ActorSpec("operator", rearm), ActorSpec("releaser", release)])
JUDGED_LIFT_DURING_REARM = Scenario("re-arm | judged lift", [ActorSpec("operator", rearm),
                                                              ActorSpec("lifter", judged_release)])
TWO_FIRST_ENGAGES_IN_A_HOME = Scenario("engage | engage (home)", [ActorSpec("a", rearm), ActorSpec("b", rearm)], None,
                                       "profiles/ops")
FIRST_ENGAGE_THEN_READ = Scenario("first engage | read", [ActorSpec("operator", rearm), ActorSpec("reader", plain_read)],
                                  None)

#: (variant, a scenario that exposes it, the invariant it breaks)
MUTATIONS = {
    "write-then-audit": (variants.WriteThenAudit, READ_DURING_REARM, 4),
    "unlink-before-fence-check": (variants.UnlinkBeforeFenceCheck, RETIRE_DURING_REARM, 2),
    "deadman-unlink-before-fence-check": (variants.UnlinkBeforeFenceCheck, DEADMAN_DURING_REARM, 2),
    "fsync-after-rename": (variants.FsyncAfterRename, READ_DURING_REARM, 3),
    "unlink-then-create": (variants.UnlinkThenCreate, READ_DURING_REARM, 3),
    "audit-without-fsync": (variants.AuditWithoutFsync, READ_DURING_REARM, 4),
    "audit-dir-fsync-only-when-new": (variants.AuditDirFsyncOnlyWhenNew, TWO_FIRST_ENGAGES_IN_A_HOME, 4),
    "release-without-lock": (variants.ReleaseWithoutLock, RELEASE_DURING_REARM, 6),
    "no-dir-fsync-on-first-arm": (variants.NoDirFsyncOnFirstArm, FIRST_ENGAGE_THEN_READ, 8),
    "lift-judged-before-the-lock": (variants.JudgeBeforeLock, JUDGED_LIFT_DURING_REARM, 9),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_every_known_wrong_variant_of_the_protocol_fails_the_checker(mutation, tmp_path):
    variant, scenario, invariant = MUTATIONS[mutation]
    result = explore(scenario, tmp_path, 2, variant)
    assert result.violation is not None, f"{variant.__name__} passed the checker: {result.summary()}"
    assert result.violation.invariant == invariant, result.violation.describe()
