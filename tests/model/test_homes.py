"""docs/design.md §2: the fleet root, homes, and the candidate locations of a process."""

from __future__ import annotations

import pytest

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.homes import FLEET, Layout, resolve_layout, validate_profile_name


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


# -- issue 13 item 3: the fleet root as hermes-agent derives it ------------------------------------


@pytest.mark.parametrize("sub", [".", "custom", "profiles/ops", "profiles/ops/sub", "a/b/c"])
def test_any_home_under_dot_hermes_has_the_fleet_root_dot_hermes(tmp_path, sub):
    env = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / ".hermes" / sub)}
    layout = resolve_layout(env)
    assert layout.root == (tmp_path / ".hermes").resolve()
    assert layout.candidates[-1].scope == FLEET and layout.candidates[-1].path == layout.root


def test_a_profile_home_under_dot_hermes_is_that_profile(tmp_path):
    layout = resolve_layout({"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / ".hermes" / "profiles" / "ops")})
    assert layout.profile == "ops"
    assert [loc.scope for loc in layout.candidates] == ["ops", FLEET]


def test_hermes_root_still_wins_over_a_home_under_dot_hermes(tmp_path):
    env = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / ".hermes" / "custom"),
           "HERMES_ROOT": str(tmp_path / "elsewhere")}
    assert resolve_layout(env).root == (tmp_path / "elsewhere").resolve()


def test_a_home_reached_through_a_symlink_into_dot_hermes_has_that_root(tmp_path):
    (tmp_path / ".hermes" / "custom").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / ".hermes" / "custom")
    layout = resolve_layout({"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "link")})
    assert layout.root == (tmp_path / ".hermes").resolve()


# -- issue 9 item 4: a home at profiles/<refused name> is not a profile home ----------------------


@pytest.mark.parametrize("name", ["fleet", ".hidden", "sp ace", "x" * 65])
def test_a_refused_profile_home_is_an_error_for_writes(tmp_path, name):
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "r" / "profiles" / name)})
    assert layout.profile is None and layout.refusal is not None
    with pytest.raises(InvalidArgument, match="not a valid profile home") as caught:
        _ = layout.own
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["fleet", ".hidden"])
def test_a_refused_profile_home_is_a_candidate_carrying_its_problem(tmp_path, name):
    layout = resolve_layout({"HERMES_HOME": str(tmp_path / "r" / "profiles" / name)})
    own, fleet = layout.candidates
    assert own.scope != FLEET and own.problem == layout.refusal
    assert fleet == layout.fleet and fleet.problem is None


def test_for_profile_is_that_profiles_home_and_the_fleet_root(tmp_path):
    layout = Layout(home=tmp_path, root=tmp_path)
    assert [(loc.scope, loc.path) for loc in layout.for_profile("ops").candidates] == [
        ("ops", tmp_path / "profiles" / "ops"), (FLEET, tmp_path)]
    with pytest.raises(InvalidArgument):
        layout.for_profile("fleet")
