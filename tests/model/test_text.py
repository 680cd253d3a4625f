"""The one did-you-mean every refusal of an unknown name uses."""
from __future__ import annotations

import pytest

from hermes_estop.model.text import did_you_mean


@pytest.mark.parametrize(("name", "known", "said"), [
    ("nightly-bakup", ["nightly-backup", "weekly"], "did you mean 'nightly-backup'? "),
    ("NIGHTLY", ["nightly", "weekly"], "did you mean 'nightly'? "),
    ("Ops", ["ops", "dev"], "did you mean 'ops'? "),
    ("zzz", ["nightly", "weekly"], ""),
    ("x", [], ""),
    ("ev\x1bil", ["ev\x1bil2"], "did you mean 'ev\\x1bil2'? "),
], ids=["a typo", "another case", "a short name in another case", "nothing close", "nothing known",
        "a control character escaped"])
def test_did_you_mean_names_the_closest_known_name_whatever_its_case(name, known, said):
    assert did_you_mean(name, known) == said
