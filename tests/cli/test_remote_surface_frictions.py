"""Small frictions of issue 44 item 8: `resume --profile` of a profile the fleet does not have is
refused with a did-you-mean and creates nothing; `check --at now+DUR` (as the README writes it)
forecasts from then; a held `check` says who holds and until when, not "run hermes resume"; the
README and the docs' home name the write API, tokens and the policy, and serve the built site
on loopback only."""

from __future__ import annotations

from pathlib import Path

from inprocess_cli import fleet, run  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


def test_resume_of_an_unknown_profile_is_refused_with_did_you_mean_and_creates_nothing(capsys, fleet):  # noqa: F811
    assert run(capsys, "pause", "--profile", "ops", "--reason", "x")[0] == 0
    before = sorted(p.relative_to(fleet) for p in fleet.rglob("*"))
    code, out, err = run(capsys, "resume", "--profile", "opz")
    assert code == 2 and err.count("\n") == 1
    assert "no profile 'opz'" in err and "did you mean 'ops'?" in err
    assert sorted(p.relative_to(fleet) for p in fleet.rglob("*")) == before
    assert not (fleet / "profiles" / "opz").exists()
    assert run(capsys, "resume", "--profile", "ops")[0] == 0


def test_check_at_now_plus_a_duration_forecasts_from_then(capsys, fleet):  # noqa: F811
    code, out, err = run(capsys, "check", "--at", "now+1d", "--for", "6h")
    assert code == 0 and out.startswith("proceed: not held at any instant of") and not err
    code, _, err = run(capsys, "check", "--at", "now+1", "--for", "6h")
    assert code == 2 and "1m? 1s?" in err


def test_a_held_check_says_who_holds_and_until_when(capsys, fleet):  # noqa: F811
    assert run(capsys, "pause", "--fleet", "--reason", "db migration", "--ttl", "2h")[0] == 0
    code, out, _ = run(capsys, "check")
    assert code == 1 and out.count("\n") == 1
    assert "hermes resume" not in out
    assert out.startswith("held: fleet is held (db migration) by ") and " until " in out


def test_the_readme_and_the_docs_home_name_the_write_api_and_the_policy():
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        text = page.read_text()
        assert "api.md" in text and "policy.md" in text and "tokens create" in text
    readme = (ROOT / "README.md").read_text()
    assert "http.server --bind 127.0.0.1" in readme
    assert "--at now+1d" in readme  # the form the performance table names: it runs (above)
