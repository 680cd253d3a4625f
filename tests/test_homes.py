"""DESIGN 2: the fleet root, homes, and the candidate locations of a process."""

from __future__ import annotations

import pytest

from hermes_estop.errors import InvalidArgument
from hermes_estop.homes import FLEET, Layout, resolve_layout, validate_profile_name


def test_root_is_hermes_root_when_set(tmp_path):
    layout = resolve_layout({"HERMES_ROOT": str(tmp_path / "r"), "HERMES_HOME": str(tmp_path / "r" / "profiles" / "ops")})
    assert layout.root == (tmp_path / "r").resolve()
    assert layout.profile == "ops"


def test_root_is_derived_from_a_profile_home(tmp_path):
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "r" / "profiles" / "ops")})
    assert layout.root == (tmp_path / "r").resolve()
    assert [loc.scope for loc in layout.candidates] == ["ops", FLEET]


def test_root_is_hermes_home_when_not_a_profile_home(tmp_path):
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "solo")})
    assert layout.root == layout.home == (tmp_path / "solo").resolve()
    assert [loc.scope for loc in layout.candidates] == [FLEET]


def test_default_root_is_dot_hermes_in_the_user_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    layout = resolve_layout({})
    assert layout.root == (tmp_path / ".hermes").resolve()


def test_candidates_are_deduplicated_after_resolving(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (tmp_path / "alias").symlink_to(root)
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "alias"), "HERMES_ROOT": str(root)})
    assert len(layout.candidates) == 1


def test_home_outside_the_fleet_layout_is_its_own_location(tmp_path):
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "elsewhere"), "HERMES_ROOT": str(tmp_path / "r")})
    own, fleet = layout.candidates
    assert own.scope.startswith("home:") and fleet.scope == FLEET
    assert layout.profile is None


def test_location_of_a_scope_name(tmp_path):
    layout = Layout(home=tmp_path, root=tmp_path)
    assert layout.location("fleet") == layout.fleet
    assert layout.location("ops").path == tmp_path / "profiles" / "ops"


@pytest.mark.parametrize("name", ["", "../etc", "a/b", ".hidden", "fleet", "x" * 65, "sp ace"])
def test_bad_profile_names_are_refused_by_name(name):
    with pytest.raises(InvalidArgument, match="invalid profile name"):
        validate_profile_name(name)
