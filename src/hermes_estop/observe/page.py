"""The status page (`GET /`): what holds now and the week ahead, for a person at a glance.

Server-rendered HTML with the timeline as inline SVG and no JavaScript; `<meta http-equiv=
"refresh">` reloads it, which is what makes the deadline count down. Every value that comes
from a sentinel, a window file or the environment is escaped twice over: control characters
and bidirectional overrides shown as `\\x1b` / `\\u202e` (`printable`), then HTML-escaped.

The present comes first: `#covering-now`, under the verdict, has one `.now-item` per thing that
covers now (`data-kind` `window` or `hold`, `data-scope`, `data-window`, `data-end`) naming it
and its end, or says that nothing does and what comes next. Occurrence times are given in UTC
and in the window's own zone (`window_times.in_zones`). On a phone (390 px) nothing is wider than the
screen: the timeline scrolls inside its box at its full size (its text stays legible), the
occurrence table stacks each row.

Stable hooks: `#verdict` (`data-engaged`), `#covering-now`, one `.hold-card` per present hold
(`data-scope`, `data-state`) with `.reason`, `.deadline`, `.allowlist`, `.armed-by`; the timeline
(`svg.py`); `#upcoming` rows (`data-window`; the start and end cells carry `title`s in both
zones; `td.impact`, with `data-held-runs` and `data-ready-cards`: what the occurrence holds back,
its details in a `<details>`, one click away); `#problems`; `#problem-banner` (the same problems, under the verdict: a windows.toml that
does not validate is never shown only at the bottom); `#override-banner` (one `li` per standing
hold written with `--override`, `data-generation`) and, on its card, `.override` (and
`.outside` for a hold no hermes write is on the audit trail for); a signed-in operator's
`.hold-actions` on each active hold's card (`render_page(card_actions=...)`, `api.page_actions`);
`.scroll-hint`, shown on a phone, where the timeline scrolls sideways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from html import escape
from typing import TYPE_CHECKING

from hermes_estop.model.hold import Allow, Cause, Hold, HoldState, Reading
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import format_instant, format_relative
from hermes_estop.observe.impact_preview import impact_lines
from hermes_estop.observe.status import flat
from hermes_estop.observe.svg import render_timeline_svg
from hermes_estop.observe.view import FleetView
from hermes_estop.observe.window_times import covering_now, in_zones, utc, windows_named
from hermes_estop.process.describe import covers

if TYPE_CHECKING:
    from hermes_estop.consumers.impact import Impact
    from hermes_estop.windows.model import Window

__all__ = ["PAGE_CSS", "REFRESH_SECONDS", "UPCOMING_ROWS", "CardActions", "render_page"]

#: what a signed-in page puts on a hold's card (`api.page_actions`): its forms, or ""
CardActions = Callable[[Reading], str]

REFRESH_SECONDS = 30
UPCOMING_ROWS = 20

PAGE_CSS = _CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f8fafc;color:#111827}
main{max-width:1140px;margin:0 auto;padding:20px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.meta{color:#6b7280;font-size:13px}
#verdict{padding:14px 18px;border-radius:8px;font-size:18px;font-weight:600;margin:14px 0}
#verdict.held{background:#fee2e2;color:#991b1b;border:1px solid #fca5a5}
#verdict.free{background:#dcfce7;color:#166534;border:1px solid #86efac}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.hold-card{background:#fff;border:1px solid #e5e7eb;border-left:6px solid #dc2626;border-radius:8px;padding:10px 14px;min-width:320px;flex:1}
.hold-card.state-unreadable{border-left-color:#7c3aed} .hold-card.state-expired{border-left-color:#9ca3af}
.hold-card dl{display:grid;grid-template-columns:110px 1fr;margin:6px 0 0;gap:2px 8px}
.hold-card dt{color:#6b7280} .hold-card dd{margin:0;word-break:break-word}
.scope{font-weight:600}
.timeline{background:#fff;border:1px solid #e5e7eb;border-radius:8px}
.lane-bg{fill:#f9fafb} .lane.held .lane-label{fill:#b91c1c}
.lane-label{font-size:13px;font-weight:600;fill:#374151}
.bar-label{font-size:12px;fill:#374151} .day{stroke:#d1d5db;stroke-width:1} .day-label{font-size:12px;fill:#6b7280}
.now{stroke:#111827;stroke-width:2}
.bar,.skip-mark{vector-effect:non-scaling-stroke} .bar{stroke:#1e3a8a;stroke-width:1} .bar-upcoming{fill:#3b82f6} .bar-active{fill:#f59e0b;stroke:#92400e}
.bar-skipped{fill:url(#hatch);stroke:#6b7280;stroke-dasharray:3 2} .skip-mark{stroke:#6b7280;stroke-width:1.5}
.bar-released{fill:#e5e7eb;stroke:#6b7280} .bar-disabled{fill:#f3f4f6;stroke:#d1d5db;stroke-dasharray:2 2}
.hold{fill:#fecaca;opacity:.75} .hold-unreadable{fill:#ddd6fe}
.deadman{stroke:#dc2626;stroke-width:3} .hold-open{fill:none;stroke:#dc2626;stroke-width:2}
#covering-now{background:#fffbeb;border:1px solid #f59e0b;border-left:8px solid #d97706;border-radius:8px;padding:10px 16px;margin:0 0 14px}
#covering-now h2{margin:0 0 4px;font-size:17px} #covering-now ul{margin:0;padding-left:18px} #covering-now p{margin:0}
.now-item{font-size:17px;margin:2px 0} .now-item .what{font-weight:700} .now-item .local,.now-next .local{color:#4b5563;font-size:14px}
.now-block{fill:#f59e0b;stroke:#78350f;stroke-width:1.5} .now-row{fill:#fef3c7} .now-label{font-size:13px;font-weight:700;fill:#78350f}
.scroll{overflow-x:auto;max-width:100%} #timeline{min-width:1100px;display:block}
td .local{display:block;color:#6b7280;font-size:12px}
.impact summary{cursor:pointer;color:#1e3a8a;font-weight:600} .impact details[open] summary{margin-bottom:4px}
.impact-total{margin:0 0 4px;font-size:13px;color:#374151} .impact-lines{margin:0;padding-left:16px;font-size:13px;word-break:break-word;white-space:pre-wrap}
.legend{display:flex;gap:16px;flex-wrap:wrap;font-size:13px;color:#374151;margin:6px 0}
.sw{display:inline-block;width:14px;height:10px;border-radius:2px;margin-right:5px;vertical-align:middle}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #e5e7eb;font-size:14px}
td,th{padding:5px 10px;border-bottom:1px solid #f3f4f6;text-align:left} th{color:#6b7280;font-weight:500}
#problems li{color:#991b1b}
#problem-banner{padding:10px 18px;border-radius:8px;margin:0 0 14px;background:#fef3c7;color:#92400e;border:1px solid #f59e0b}
#problem-banner ul{margin:4px 0}
#override-banner{padding:10px 18px;border-radius:8px;margin:0 0 14px;background:#fee2e2;color:#991b1b;border:1px solid #ef4444}
#override-banner ul{margin:4px 0}
.scroll-hint{display:none}
.hold-actions{margin:10px 0 0;padding:8px 0 0;border-top:1px solid #f3f4f6;display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}
.hold-actions form{display:flex;gap:6px;flex-wrap:wrap;margin:0}
.hold-actions details{flex-basis:100%} .hold-actions summary{cursor:pointer;font-weight:600;color:#991b1b}
.hold-actions .confirm{margin:6px 0;color:#374151}
button{font:inherit;padding:5px 12px;border-radius:6px;border:1px solid #9ca3af;background:#fff;cursor:pointer}
button.lift{background:#dc2626;border-color:#b91c1c;color:#fff} button.extend,#pause{background:#1e3a8a;border-color:#1e3a8a;color:#fff}
input{font:inherit;padding:4px 8px;border:1px solid #d1d5db;border-radius:6px;max-width:100%;box-sizing:border-box}
#actions{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:10px 14px;margin:0 0 14px}
#actions form{margin:4px 0} .inline{display:inline-block}
.flash.error{color:#991b1b;font-weight:600} .flash.ok{color:#166534}
.signin{max-width:28rem;background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:14px 18px}
.signin label{display:block;margin:6px 0 2px;color:#374151} .signin input{width:100%;font-size:16px}
#signin-error{color:#991b1b;font-weight:600}
@media (max-width:640px){
main{padding:12px} h1{font-size:18px} #verdict{font-size:16px;padding:10px 12px}
.scroll-hint{display:block;margin:0 0 4px;font-size:13px;color:#374151}
.scroll{border-right:4px solid #9ca3af;scrollbar-width:thin}
.hold-card{min-width:0;flex-basis:100%} .hold-card dl{grid-template-columns:84px minmax(0,1fr)}
.legend{gap:4px 12px;font-size:12px} #upcoming thead{display:none} #upcoming tr{display:block;padding:6px 0;border-bottom:1px solid #e5e7eb}
#upcoming td{display:block;border:0;padding:1px 10px} #upcoming td::before{content:attr(data-label) ": ";color:#6b7280}
}
"""

_LEGEND = (
    '<div class="legend">'
    '<span><i class="sw" style="background:#3b82f6"></i>window occurrence</span>'
    '<span><i class="sw" style="background:#bfdbfe"></i>drain lead (held before the start)</span>'
    '<span><i class="sw" style="background:#f59e0b;outline:1.5px solid #78350f"></i>covering now, to its end</span>'
    '<span><i class="sw" style="background:repeating-linear-gradient(45deg,#9ca3af 0 3px,#f3f4f6 3px 6px)"></i>skipped</span>'
    '<span><i class="sw" style="background:#e5e7eb"></i>released early / disabled</span>'
    '<span><i class="sw" style="background:#fecaca"></i>current hold</span>'
    '<span><i class="sw" style="background:#dc2626;width:3px"></i>deadman</span>'
    '</div>'
)


def _t(value: object) -> str:
    """Text for HTML: control characters escaped (`printable`), then HTML-escaped."""
    return escape(printable(value), quote=True)


def _verdict(engaged: bool, held: int) -> str:
    """The page's one-line answer: held here, or free (with the holds elsewhere counted)."""
    plural = "s" if held != 1 else ""
    if engaged:
        return f"HELD: new work is paused ({held} active hold{plural})"
    verdict = "Free: no hold on this process's locations"
    return verdict + f" ({held} profile hold{plural} elsewhere)" if held else verdict


def _problem_banner(view: FleetView) -> str:
    return ('<div id="problem-banner" role="alert"><b>Problem:</b><ul>'
            + "".join(f"<li>{_t(p)}</li>" for p in view.problems) + "</ul>"
            + ("<p>The windows shown are the last ones that validated.</p>"
               if view.extra.get("windows_last_good") else "") + "</div>")


def render_page(view: FleetView, *, title: str = "hermes-estop", refresh: int = REFRESH_SECONDS,
                card_actions: CardActions | None = None, impacts: Mapping[str, Impact | str] | None = None) -> str:
    """The whole page for `view`; `card_actions`: a signed-in operator's forms on each card;
    `impacts`: what each upcoming occurrence holds back, by bar key (`impact_preview.bar_impacts`)."""
    now = view.now
    engaged = view.snapshot.engaged
    present = [r for lane in view.lanes if lane.reading is not None for r in flat((lane.reading,))]
    verdict = _verdict(engaged, sum(1 for r in present if r.active))
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="refresh" content="{int(refresh)}">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{'HELD' if engaged else 'free'} - {_t(title)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{_t(title)}</h1>",
        f'<div class="meta">as of <time id="now" datetime="{format_instant(now)}">{utc(now)}</time>'
        f" &middot; store {_t(_store_name(view))}"
        f" &middot; refreshes every {int(refresh)} s &middot; read-only</div>",
        f'<div id="verdict" class="{"held" if engaged else "free"}" data-engaged="{"true" if engaged else "false"}">'
        f"{_t(verdict)}</div>",
    ]
    if view.problems:  # in the banner, not only at the bottom: a broken windows.toml arms nothing
        parts.append(_problem_banner(view))
    parts.append(_overrides(view))
    parts.append(_covering_now(view))
    parts.append('<section id="holds"><h2>What holds now</h2>')
    if present:
        parts.append('<div class="cards">')
        parts.extend(_card(reading, view, card_actions) for reading in present)
        parts.append("</div>")
    else:
        parts.append('<p class="none">No hold at any scope.</p>')
    parts.append("</section>")
    parts.append(f'<section id="timeline-section"><h2>Next {_days(view)} (UTC)</h2>')
    parts.append(_LEGEND)
    parts.append(f'<p class="scroll-hint">Swipe sideways on the timeline for all {_days(view)}.</p>')
    parts.extend(('<div class="scroll">', render_timeline_svg(view), "</div>"))  # no copy of the big SVG
    parts.append("</section>")
    parts.append(_upcoming(view, impacts))
    parts.append(_consumers(view))
    if view.problems:
        parts.append('<section><h2>Problems</h2><ul id="problems">')
        parts.extend(f"<li>{_t(p)}</li>" for p in view.problems)
        parts.append("</ul></section>")
    parts.append("</main></body></html>")
    return "".join(parts)


def _overrides(view: FleetView) -> str:
    """Break glass, in the banner for as long as the hold it wrote stands (issue 37)."""
    overrides = view.status.record.overrides if view.status is not None else ()
    if not overrides:
        return ""
    return ('<div id="override-banner" role="alert"><b>Policy overridden:</b><ul>'
            + "".join(f'<li data-generation="{_t(o.generation)}">{_t(o.line())}</li>' for o in overrides)
            + "</ul></div>")


def _store_name(view: FleetView) -> str:
    return str(view.extra.get("store", "?"))


def _days(view: FleetView) -> str:
    days = round((view.end - view.start).total_seconds() / 86400)
    return f"{days} day{'s' if days != 1 else ''}"


def _card(reading: Reading, view: FleetView, actions: CardActions | None = None) -> str:
    scope = _t(reading.location.scope)
    state = reading.state.value
    rows: list[tuple[str, str, str]] = []
    if reading.state is HoldState.UNREADABLE and reading.cause is Cause.EMPTY:
        head = "HELD (a hand-made stop with no details: admits nobody)"
    elif reading.state is HoldState.UNREADABLE:
        head = "HELD (unreadable: admits nobody)"
        rows.append(("problem", "problem", _t(reading.problem or "unreadable")))
    elif reading.state is HoldState.EXPIRED:
        head = "lifted (expired, not yet retired)"
    else:
        head = "HELD"
    hold = reading.hold
    if hold is not None and hold.selector is not None:
        head += f" only {_t(covers(hold.selector))} (scoped hold {_t(hold.hold_id)})"
    rows.append(("covers", "covers", _t(covers(hold.selector if hold is not None else None))))
    if hold is not None and reading.state is not HoldState.UNREADABLE:
        rows += _hold_rows(hold, view)
    if reading.active:
        rows += _record_rows(reading, view)
    lift = view.status.lift(reading) if view.status is not None and reading.active else None
    if lift is not None:
        rows.append(("lift", "lift it", f"<code>{_t(lift)}</code> (from here)") if actions is None else
                    ("lift", "or in a shell", f"<code>{_t(lift)}</code> (on the host serving this page)"))
    body = "".join(f'<dt>{label}</dt><dd class="{cls}">{value}</dd>' for cls, label, value in rows)
    forms = actions(reading) if actions is not None else ""
    return (f'<div class="hold-card state-{state}" data-scope="{scope}" data-state="{state}">'
            f'<div><span class="scope">{scope}</span> &middot; {head}</div><dl>{body}</dl>{forms}</div>')


def _record_rows(reading: Reading, view: FleetView) -> list[tuple[str, str, str]]:
    """What the audit trail says of an active hold (issue 37): armed over policy, or written outside hermes."""
    record = view.status.record if view.status is not None else None
    if record is None:
        return []
    rows = []
    override = record.override_of(reading.hold.generation if reading.hold is not None else None)
    if override is not None:
        rows.append(("override", "OVERRIDE", f"{_t(override.actor or '?')} broke glass over policy "
                                             f"<code>{_t(override.rule or '?')}</code>: {_t(override.reason or '')}"))
    if record.written_outside(reading):
        rows.append(("outside", "written", "outside hermes (no write of it on the audit trail)"))
    return rows


def _hold_rows(hold: Hold, view: FleetView) -> list[tuple[str, str, str]]:
    """A readable hold's rows on its card: reason, deadline, allowlist, who, since, which window."""
    now = view.now
    rows = [("reason", "reason", _t(hold.reason) if hold.reason else "<i>(none)</i>")]
    if hold.expires_at is not None:
        when = format_instant(hold.expires_at)
        rows.append(("deadline", "deadline",
                     f'<time datetime="{when}">{utc(hold.expires_at)}</time> <b>({_t(format_relative(hold.expires_at, now))})</b>'))
    else:
        rows.append(("deadline", "deadline", "none: held until <code>hermes resume</code>"))
    rows.append(("allowlist", "allow", _allow_text(hold.allow)))
    rows.append(("armed-by", "armed by", _t(hold.armed_by) if hold.armed_by else "<i>(unknown)</i>"))
    if hold.engaged_at is not None:
        rows.append(("engaged-at", "since", f"{utc(hold.engaged_at)} "
                                            f"({_t(format_relative(hold.engaged_at, now))})"))
    rows.append(("generation", "generation", _t(hold.generation or "(none: hand-written)")))
    if hold.window:
        name = hold.window.get("name")
        rows.append(("window", "window", _t(name if name is not None else dict(hold.window))))
        rows.append(("window-next", "next occurrence", _window_next(name, view)))
    return rows


def _allow_text(allow: Allow) -> str:
    if allow.user_ids:
        users = ", ".join(_t(u) for u in sorted(allow.user_ids))
        narrowed = f" on profiles {', '.join(_t(p) for p in sorted(allow.profiles))}" if allow.profiles else ""
        return f"users {users}{narrowed}"
    return "nobody" if allow.valid else "(malformed: admits nobody)"


def _window_next(name: object, view: FleetView) -> str:
    """The next occurrence of the window `name` armed a hold for, in UTC and its zone, or why
    there is none: a card says when that window holds again (issue 38)."""
    state = next((s for s in view.windows if s.window.name == name), None)
    if state is None:
        return "none: the window is no longer in windows.toml"
    if state.next_start is None:
        return "none ahead" if state.window.enabled else "none: the window is disabled"
    start = state.next_start
    return (f'<time datetime="{format_instant(start)}">{_t(in_zones(start, state.window.tz))}</time> '
            f"({_t(format_relative(start, view.now))})")


def _covering_now(view: FleetView) -> str:
    """The present, first: each occurrence covering now and each standing hold, with its end
    (in UTC and the window's zone); or that nothing does, and what comes next."""
    now = view.now
    covering = covering_now(view)
    items = []
    for lane in view.lanes:
        for bar, window in covering.get(lane.scope, ()):
            items.append(_now_item("window", bar.scope, bar.window, bar.end,
                                   f'<span class="what">{_t(bar.window)}</span> ({_t(bar.scope)}) covers now, '
                                   + _until(bar.end, window, now)))
        reading = lane.reading
        if reading is None or not reading.active:
            continue
        hold = reading.hold
        deadman = hold.expires_at if hold is not None and reading.state is HoldState.ACTIVE else None
        held = f'<span class="what">{_t(lane.scope)}</span> is held'
        by_window = hold.window.get("name") if hold is not None and hold.window else None
        if by_window is not None:
            held += f" by window {_t(by_window)}"
        if reading.state is HoldState.UNREADABLE:
            what = "a hand-made stop with no details" if reading.cause is Cause.EMPTY else "unreadable"
            items.append(_now_item("hold", lane.scope, "", None,
                                   held + f" ({what}: admits nobody), until <code>hermes resume</code>"))
        elif deadman is None:
            items.append(_now_item("hold", lane.scope, "", None,
                                   held + ", with no deadman: until <code>hermes resume</code>"))
        else:
            items.append(_now_item("hold", lane.scope, "", deadman, held + ", " + _until(deadman, None, now)))
    if items:
        return ('<section id="covering-now" data-covering="true"><h2>Covering now</h2><ul>'
                + "".join(items) + "</ul></section>")
    upcoming = [bar for bar in view.first_bars(1) if bar.start > now]
    after = ""
    if upcoming:
        bar = upcoming[0]
        after = (f' <span class="now-next">Next: <b>{_t(bar.window)}</b> ({_t(bar.scope)}) '
                 f"{_until(bar.start, windows_named(view, {bar.window}).get(bar.window), now, word='at')}.</span>")
    return (f'<section id="covering-now" data-covering="false"><h2>Covering now</h2>'
            f"<p>Nothing covers now: no window occurrence, no hold.{after}</p></section>")


def _now_item(kind: str, scope: str, window: str, end: datetime | None, body: str) -> str:
    ending = format_instant(end) if end is not None else ""
    return (f'<li class="now-item" data-kind="{kind}" data-scope="{_t(scope)}" data-window="{_t(window)}" '
            f'data-end="{ending}">{body}</li>')


def _until(when: datetime, window: Window | None, now: datetime, word: str = "until") -> str:
    """`until <UTC> (<relative>)` and, for a window read in another zone, its local time there."""
    zone = window.tz if window is not None else None
    both = in_zones(when, zone)
    utc_part, _, local = both.partition(" = ")
    local_part = f' <span class="local">= {_t(local)}</span>' if local else ""
    return (f'{word} <time datetime="{format_instant(when)}" title="{_t(both)}">{_t(utc_part)}</time>{local_part} '
            f"<b>({_t(format_relative(when, now))})</b>")


def _zoned_cell(label: str, when: datetime, zone: tzinfo | None) -> str:
    """A table cell with an instant in UTC and, below it, in the window's zone; the `title`
    carries both."""
    both = in_zones(when, zone)
    utc_part, _, local = both.partition(" = ")
    below = f'<span class="local">{_t(local)}</span>' if local else ""
    return f'<td data-label="{label}" title="{_t(both)}">{_t(utc_part)}{below}</td>'


def _upcoming(view: FleetView, impacts: Mapping[str, Impact | str] | None = None) -> str:
    total = view.bar_count
    rows = []
    first = view.first_bars(UPCOMING_ROWS)
    by_name = windows_named(view, {bar.window for bar in first})
    for bar in first:
        window = by_name.get(bar.window)
        zone = window.tz if window is not None else None
        when = ("now, until " + utc(bar.end)) if bar.state == "active" else _t(format_relative(bar.start, view.now))
        rows.append(f'<tr data-window="{_t(bar.window)}" data-state="{bar.state}"><td data-label="window">'
                    f'{_t(bar.window)}</td><td data-label="scope">{_t(bar.scope)}</td>'
                    f'{_zoned_cell("start", bar.start, zone)}{_zoned_cell("end", bar.end, zone)}'
                    f'<td data-label="when">{when}</td><td data-label="state">{bar.state}</td>'
                    f'{_impact_cell(impacts.get(bar.key)) if impacts is not None else ""}</tr>')
    more = f'<p class="meta">{total - UPCOMING_ROWS} more in the timeline.</p>' if total > UPCOMING_ROWS else ""
    if not rows:
        return '<section><h2>Upcoming occurrences</h2><p class="none" id="upcoming">No window occurs in this range.</p></section>'
    return ('<section><h2>Upcoming occurrences</h2><table id="upcoming"><thead><tr><th>window</th><th>scope</th>'
            '<th>start</th><th>end</th><th>when</th><th>state</th>'
            + ("<th>holds back</th>" if impacts is not None else "") + '</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>" + more + "</section>")


def _impact_cell(found: Impact | str | None) -> str:
    """`4 cron runs, 2 ready cards`, the details (per home and job, the cards, the gateway, the
    consumers) one click away in a `<details>` (no JavaScript); or why none is shown."""
    if found is None:
        return '<td data-label="holds back" class="impact">-</td>'
    if isinstance(found, str):
        return f'<td data-label="holds back" class="impact">{_t(found)}</td>'
    summary = (f"{found.held_runs} cron run{'' if found.held_runs == 1 else 's'}, "
               f"{found.cards.waiting} ready card{'' if found.cards.waiting == 1 else 's'}")
    lines = "".join(f"<li>{_t(line)}</li>" for line in impact_lines(found))
    return (f'<td data-label="holds back" class="impact" data-held-runs="{found.held_runs}" '
            f'data-ready-cards="{found.cards.waiting}"><details><summary>{summary}</summary>'
            f'<p class="impact-total">{_t(found.totals())}</p><ul class="impact-lines">{lines}</ul></details></td>')


def _consumers(view: FleetView) -> str:
    """The consumer registry: who starts work, whether each saw the holds standing now."""
    roster = view.status.roster if view.status is not None else None
    if roster is None:
        return ""
    head = f'<section id="consumers"><h2>Consumers</h2><p class="meta" id="consumers-line">{_t(roster.line())}</p>'
    if not roster.rows:
        return head + "</section>"
    rows = "".join(
        f'<tr data-component="{_t(row.entry.component)}" data-state="{row.state.value}" '
        f'data-acknowledged="{"true" if row.acknowledged else "false"}"><td>{_t(row.entry.component)}</td>'
        f"<td>{_t(row.entry.host)}</td><td>{row.entry.pid}</td><td>{_t(row.entry.profile or '-')}</td>"
        f"<td>{row.state.value}</td><td>{'yes' if row.acknowledged else 'NO'}</td><td>{row.lag:.1f} s</td></tr>"
        for row in roster.rows)
    return (head + '<div class="scroll"><table id="consumer-table"><thead><tr><th>component</th><th>host</th><th>pid</th><th>profile</th>'
            "<th>state</th><th>acknowledged</th><th>last report</th></tr></thead><tbody>" + rows + "</tbody></table></div></section>")
