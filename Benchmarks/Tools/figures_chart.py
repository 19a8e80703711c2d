"""The README's chart as SVG markup: deliveries per second against subscribers, log-log, one
line per implementation, drawn from the data file's raw samples (figures.py calls `svg`)."""
import math
import statistics
import textwrap
from xml.sax.saxutils import escape

WIDTH = 900
LEFT, TOP, PLOT_W, PLOT_H = 84, 52, 520, 360
FONT = "font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\""

# (label, scenario, impl, policy or None, colour, dashed, width)
SERIES = [
    ("AsyncMulticast share()", "fanout", "ours", "bounded64", "#1565c0", False, 3.2),
    ("hand-rolled broadcaster", "fanout", "handRolled", "bounded64", "#2e8b3e", False, 2),
    ("swift-async-algorithms share()", "fanout", "saa", "bounded64", "#e67e00", False, 2),
    ("AsyncMulticast subject", "subject", "ours", None, "#1565c0", True, 3.2),
    ("OpenCombine PassthroughSubject", "subject", "openCombine", None, "#8e44ad", True, 2),
]


def _si(value):
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:g}{suffix}"
    return f"{value:g}"


def _points(runs, scenario, impl, policy):
    """[(N, median, low, high)] over the runs' per-run values."""
    out = []
    match = {"policy": policy} if policy else {}
    for n in runs.ns(scenario):
        values = runs.per_run(scenario, "rate", impl, n=n, **match)
        if values:
            out.append((n, statistics.median(values), min(values), max(values)))
    return out


def svg(runs, caption):
    series = [(label, _points(runs, scenario, impl, policy), colour, dashed, width)
              for label, scenario, impl, policy, colour, dashed, width in SERIES]
    values = [v for _, points, *_ in series for p in points for v in p[1:]]
    ns = sorted({p[0] for _, points, *_ in series for p in points})
    if not values or not ns:
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n"
    # The data's range and a margin of a sixth of a decade, so that no point sits on the frame.
    low_log = math.log10(min(values)) - 0.17
    high_log = math.log10(max(values)) + 0.17
    low_decade, high_decade = math.floor(low_log), math.ceil(high_log)
    low_n, high_n = math.log2(ns[0]), math.log2(ns[-1])

    def x(n):
        span = (high_n - low_n) or 1
        return LEFT + (math.log2(n) - low_n) / span * PLOT_W

    def y(v):
        return TOP + PLOT_H - (math.log10(v) - low_log) / (high_log - low_log) * PLOT_H

    caption_lines = textwrap.wrap(caption, 142)
    height = TOP + PLOT_H + 72 + len(caption_lines) * 16
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="Deliveries per second against subscribers">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="28" {FONT} font-size="17" font-weight="600" fill="#222">'
        f"Deliveries per second by number of subscribers (higher is better)</text>",
    ]
    # Grid: minor lines at 2..9 of each decade, major lines and labels at the decades.
    for decade in range(low_decade, high_decade + 1):
        for step in range(1, 10):
            v = step * 10**decade
            if not low_log <= math.log10(v) <= high_log:
                continue
            width, colour = (1, "#cccccc") if step == 1 else (0.6, "#eeeeee")
            out.append(f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                       f'stroke="{colour}" stroke-width="{width}"/>')
            if step == 1:
                out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" {FONT} font-size="12" fill="#444" '
                           f'text-anchor="end">{_si(v)}</text>')
    for n in ns:
        out.append(f'<line x1="{x(n):.1f}" x2="{x(n):.1f}" y1="{TOP}" y2="{TOP + PLOT_H}" stroke="#e4e4e4" '
                   f'stroke-width="1"/>')
        out.append(f'<text x="{x(n):.1f}" y="{TOP + PLOT_H + 18}" {FONT} font-size="12" fill="#444" '
                   f'text-anchor="middle">{n}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{LEFT + PLOT_W / 2}" y="{TOP + PLOT_H + 40}" {FONT} font-size="13" fill="#333" '
               f'text-anchor="middle">subscribers N (log scale)</text>')
    cy = TOP + PLOT_H / 2
    out.append(f'<text x="22" y="{cy}" {FONT} font-size="13" fill="#333" text-anchor="middle" '
               f'transform="rotate(-90 22 {cy})">deliveries per second (log scale)</text>')
    # Lines, range bars and markers (the thin lines first, so ours is drawn on top).
    for label, points, colour, dashed, width in reversed(series):
        if not points:
            continue
        dash = ' stroke-dasharray="7 5"' if dashed else ""
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(n):.1f},{y(v):.1f}" for i, (n, v, _, _) in enumerate(points))
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="{width}"{dash} '
                   f'stroke-linejoin="round"><title>{escape(label)}</title></path>')
        for n, v, lo, hi in points:
            if hi > lo:
                out.append(f'<line x1="{x(n):.1f}" x2="{x(n):.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" '
                           f'stroke="{colour}" stroke-width="1.5" opacity="0.7"/>')
            fill = "#ffffff" if dashed else colour
            out.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="{3.5 if width > 2 else 3}" fill="{fill}" '
                       f'stroke="{colour}" stroke-width="1.6"><title>{escape(label)}, N = {n}: '
                       f'{_si(round(v, -3 if v >= 1e4 else 0))} deliveries/s</title></circle>')
    # Legend, right of the plot, grouped by scenario.
    lx, yy = LEFT + PLOT_W + 22, TOP + 2
    groups = [("One upstream, share() (fanout)", [s for s in series if not s[3]]),
              ("A subject, send() (subject)", [s for s in series if s[3]])]
    for title, members in groups:
        out.append(f'<text x="{lx}" y="{yy + 4}" {FONT} font-size="12" font-weight="600" fill="#555">'
                   f"{escape(title)}</text>")
        yy += 24
        for label, points, colour, dashed, width in members:
            dash = ' stroke-dasharray="7 5"' if dashed else ""
            out.append(f'<line x1="{lx}" x2="{lx + 30}" y1="{yy}" y2="{yy}" stroke="{colour}" '
                       f'stroke-width="{width}"{dash}/>')
            out.append(f'<circle cx="{lx + 15}" cy="{yy}" r="3.2" fill="{"#ffffff" if dashed else colour}" '
                       f'stroke="{colour}" stroke-width="1.6"/>')
            out.append(f'<text x="{lx + 38}" y="{yy + 4}" {FONT} font-size="12" fill="#222">{escape(label)}</text>')
            yy += 24
        yy += 14
    # Caption, wrapped under the plot.
    for index, line in enumerate(caption_lines):
        out.append(f'<text x="16" y="{TOP + PLOT_H + 72 + index * 16}" {FONT} font-size="11.5" fill="#444">'
                   f"{escape(line)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
