//! Checks of a rendered chart's geometry, from its SVG markup alone (the
//! property tests run them on arbitrary charts, the report tests on every
//! chart of a real report):
//! - every mark (`class="mark"`) lies inside the plot area (`rect.plot`);
//! - the axis ticks (`data-tick`) cover every value drawn: every mark lies
//!   between the outermost tick lines, and the tick values span the data
//!   when the caller knows it;
//! - legend labels are unique and shown whole;
//! - no text leaves the viewBox (text widths estimated as the layout does);
//! - every measured point (`g.point`) carries its interval: its mark has
//!   `data-value`, `data-ci-low` ≤ value ≤ `data-ci-high`, is hollow
//!   exactly when `data-converged="false"`, and its error bar (`.ci`) spans
//!   the interval on the value axis's scale, cut at the plot's edges; and
//!   no dot or bar is drawn without one.
//!
//! Returns what is wrong, empty when nothing is.

use kscale_report::svg::{bold_width, text_width};
use roxmltree::{Document, Node};

/// Tolerance for coordinates rounded to two decimals.
const EPS: f64 = 0.02;

fn num(n: Node, attr: &str) -> Option<f64> {
    n.attribute(attr)?.parse().ok()
}

fn classes<'a>(n: &Node<'a, '_>) -> Vec<&'a str> {
    n.attribute("class")
        .map(|c| c.split_whitespace().collect())
        .unwrap_or_default()
}

struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn holds(&self, x: f64, y: f64) -> bool {
        x >= self.x0 - EPS && x <= self.x1 + EPS && y >= self.y0 - EPS && y <= self.y1 + EPS
    }
}

/// The lines of a `<text>`: its `<tspan>`s, or its own text, without the
/// `<title>` tooltip.
fn text_lines(t: Node) -> Vec<String> {
    let spans: Vec<String> = t
        .children()
        .filter(|c| c.has_tag_name("tspan"))
        .map(|c| c.text().unwrap_or("").to_string())
        .collect();
    if !spans.is_empty() {
        return spans;
    }
    vec![t
        .children()
        .filter(|c| c.is_text())
        .filter_map(|c| c.text())
        .collect::<String>()]
}

/// Extent of a text element: (x0, y0, x1, y1).
fn text_box(t: Node, default_size: f64) -> Option<(f64, f64, f64, f64)> {
    let size = num(t, "font-size").unwrap_or(default_size);
    let bold = t.attribute("font-weight") == Some("bold");
    let lines = text_lines(t);
    let width = lines
        .iter()
        .map(|l| {
            if bold {
                bold_width(l, size)
            } else {
                text_width(l, size)
            }
        })
        .fold(0.0, f64::max);
    let dy: f64 = t
        .children()
        .filter(|c| c.has_tag_name("tspan"))
        .filter_map(|c| num(c, "dy"))
        .sum();
    let (ascent, descent) = (0.95 * size, 0.25 * size);
    let anchor = t.attribute("text-anchor").unwrap_or("start");
    let span = |x: f64| match anchor {
        "middle" => (x - width / 2.0, x + width / 2.0),
        "end" => (x - width, x),
        _ => (x, x + width),
    };
    if let Some(tr) = t.attribute("transform") {
        // translate(X Y) rotate(-90): the text runs upwards from (X, Y).
        let nums: Vec<f64> = tr
            .replace(['(', ')', ','], " ")
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let (x, y) = (*nums.first()?, *nums.get(1)?);
        assert!(tr.contains("rotate(-90)"), "unexpected transform {tr}");
        let (a, b) = span(0.0);
        return Some((x - ascent, y - b, x + descent + dy, y - a));
    }
    let (x, y) = (num(t, "x")?, num(t, "y")?);
    let (x0, x1) = span(x);
    Some((x0, y - ascent, x1, y + dy + descent))
}

/// Values a chart drew, by axis: (x values, y values) for a line chart as
/// given to it, to compare with its ticks.
pub struct Drawn {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

pub fn check(svg: &str, drawn: Option<&Drawn>) -> Vec<String> {
    let mut bad = Vec::new();
    let doc = match Document::parse(svg) {
        Ok(d) => d,
        Err(e) => return vec![format!("not well-formed XML: {e}")],
    };
    let root = doc.root_element();
    let vb: Vec<f64> = root
        .attribute("viewBox")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    if vb.len() != 4 {
        return vec!["no viewBox".into()];
    }
    let view = Rect {
        x0: vb[0],
        y0: vb[1],
        x1: vb[0] + vb[2],
        y1: vb[1] + vb[3],
    };
    let default_size = num(root, "font-size").unwrap_or(12.0);
    for t in root.descendants().filter(|n| n.has_tag_name("text")) {
        let Some((x0, y0, x1, y1)) = text_box(t, default_size) else {
            bad.push("text without position".into());
            continue;
        };
        if !(view.holds(x0, y0) && view.holds(x1, y1)) {
            bad.push(format!(
                "text {:?} at ({x0:.1},{y0:.1})–({x1:.1},{y1:.1}) leaves the viewBox {:?}",
                text_lines(t).join("/"),
                vb
            ));
        }
    }
    let plot = root
        .descendants()
        .find(|n| n.has_tag_name("rect") && classes(n).contains(&"plot"));
    let marks: Vec<Node> = root
        .descendants()
        .filter(|n| classes(n).contains(&"mark"))
        .collect();
    let Some(plot) = plot else {
        if !marks.is_empty() {
            bad.push("marks without a plot area".into());
        }
        return bad;
    };
    let (px, py, pw, ph) = (
        num(plot, "x").unwrap_or(f64::NAN),
        num(plot, "y").unwrap_or(f64::NAN),
        num(plot, "width").unwrap_or(f64::NAN),
        num(plot, "height").unwrap_or(f64::NAN),
    );
    let area = Rect {
        x0: px,
        y0: py,
        x1: px + pw,
        y1: py + ph,
    };
    if !(view.holds(area.x0, area.y0) && view.holds(area.x1, area.y1)) {
        bad.push("plot area outside the viewBox".into());
    }
    for m in &marks {
        let pts: Vec<(f64, f64)> = match m.tag_name().name() {
            "circle" => vec![(
                num(*m, "cx").unwrap_or(f64::NAN),
                num(*m, "cy").unwrap_or(f64::NAN),
            )],
            "rect" => {
                let (x, y) = (
                    num(*m, "x").unwrap_or(f64::NAN),
                    num(*m, "y").unwrap_or(f64::NAN),
                );
                let (w, h) = (
                    num(*m, "width").unwrap_or(f64::NAN),
                    num(*m, "height").unwrap_or(f64::NAN),
                );
                vec![(x, y), (x + w, y + h)]
            }
            "polyline" => m
                .attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .map(|p| {
                    let (a, b) = p.split_once(',').unwrap_or(("nan", "nan"));
                    (a.parse().unwrap_or(f64::NAN), b.parse().unwrap_or(f64::NAN))
                })
                .collect(),
            "path" => path_points(*m),
            other => {
                bad.push(format!("unknown mark <{other}>"));
                vec![]
            }
        };
        for (x, y) in pts {
            if !area.holds(x, y) {
                bad.push(format!(
                    "{} mark at ({x},{y}) outside the plot area {px},{py} {pw}×{ph}",
                    m.tag_name().name()
                ));
            }
        }
    }
    // Geometric coverage: marks between the outermost tick lines.
    let tick_pos = |axis: &str, attr: &str| -> Option<(f64, f64)> {
        let v: Vec<f64> = root
            .descendants()
            .filter(|g| g.has_tag_name("g") && classes(g).contains(&axis))
            .flat_map(|g| g.descendants())
            .filter(|l| l.attribute("data-tick").is_some())
            .filter_map(|l| num(l, attr))
            .collect();
        (!v.is_empty()).then(|| {
            (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        })
    };
    let xspan = tick_pos("xticks", "x1");
    let yspan = tick_pos("yticks", "y1");
    for m in &marks {
        let pts: Vec<(f64, f64)> = match m.tag_name().name() {
            "circle" => vec![(num(*m, "cx").unwrap_or(0.0), num(*m, "cy").unwrap_or(0.0))],
            "rect" => {
                let (x, y) = (num(*m, "x").unwrap_or(0.0), num(*m, "y").unwrap_or(0.0));
                let w = num(*m, "width").unwrap_or(0.0);
                vec![(x, y), (x + w, y)]
            }
            // An error bar's span: its caps reach across the value axis.
            "path" => path_points(*m).into_iter().take(2).collect(),
            _ => m
                .attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|p| p.split_once(','))
                .map(|(a, b)| (a.parse().unwrap_or(0.0), b.parse().unwrap_or(0.0)))
                .collect(),
        };
        for (x, y) in pts {
            if let Some((a, b)) = xspan {
                if x < a - EPS || x > b + EPS {
                    bad.push(format!("mark at x={x} beyond the x ticks {a}..{b}"));
                }
            }
            if let Some((a, b)) = yspan {
                if y < a - EPS || y > b + EPS {
                    bad.push(format!("mark at y={y} beyond the y ticks {a}..{b}"));
                }
            }
        }
    }
    let ticks = |axis: &str| -> Vec<f64> {
        root.descendants()
            .filter(|g| g.has_tag_name("g") && classes(g).contains(&axis))
            .flat_map(|g| g.descendants())
            .filter_map(|l| num(l, "data-tick"))
            .collect()
    };
    let covers = |vals: &[f64], ticks: &[f64], axis: &str, bad: &mut Vec<String>| {
        let lo = ticks.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ticks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        for v in vals.iter().filter(|v| v.is_finite()) {
            if *v < lo - lo.abs() * 1e-12 || *v > hi + hi.abs() * 1e-12 {
                bad.push(format!("{axis} value {v} outside the ticks {lo}..{hi}"));
            }
        }
    };
    if let Some(d) = drawn {
        let kind = root.attribute("data-kind").unwrap_or("");
        if kind == "line" || kind == "history" {
            covers(&d.x, &ticks("xticks"), "x", &mut bad);
            covers(&d.y, &ticks("yticks"), "y", &mut bad);
        } else {
            covers(&d.y, &ticks("xticks"), "value", &mut bad);
        }
    }
    // Legend: unique labels, each shown whole (wrapping only splits it).
    let mut seen: Vec<String> = Vec::new();
    for e in root
        .descendants()
        .filter(|n| classes(n).contains(&"legend-entry"))
    {
        let label = e.attribute("data-label").unwrap_or("").to_string();
        if seen.contains(&label) {
            bad.push(format!("legend label {label:?} twice"));
        }
        let shown: String = e
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .flat_map(text_lines)
            .collect::<Vec<_>>()
            .join("");
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        if squash(&shown) != squash(&label) {
            bad.push(format!("legend shows {shown:?} for {label:?}"));
        }
        seen.push(label);
    }
    bad.extend(check_points(&doc));
    bad
}

/// The coordinates of a path drawn with absolute M and L only.
fn path_points(n: Node) -> Vec<(f64, f64)> {
    n.attribute("d")
        .unwrap_or("")
        .replace(['M', 'L'], " ")
        .split_whitespace()
        .map(|p| {
            let (a, b) = p.split_once(',').unwrap_or(("nan", "nan"));
            (a.parse().unwrap_or(f64::NAN), b.parse().unwrap_or(f64::NAN))
        })
        .collect()
}

/// A chart's value axis from its ticks: (lowest value, highest value,
/// pixels per unit, pixel of the lowest value), and whether values run
/// up the page. Line and column charts run them up, bar charts across.
fn value_axis(root: Node) -> Option<(f64, f64, f64, f64, bool)> {
    let vertical = root.attribute("data-kind") != Some("bar");
    let (group, attr) = if vertical {
        ("yticks", "y1")
    } else {
        ("xticks", "x1")
    };
    let mut t: Vec<(f64, f64)> = root
        .descendants()
        .filter(|g| g.has_tag_name("g") && classes(g).contains(&group))
        .flat_map(|g| g.descendants())
        .filter_map(|l| Some((num(l, "data-tick")?, num(l, attr)?)))
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, last) = (*t.first()?, *t.last()?);
    if last.0 <= first.0 {
        return None;
    }
    let scale = (last.1 - first.1) / (last.0 - first.0);
    Some((first.0, last.0, scale, first.1, vertical))
}

/// The interval checks of every `g.point` (see the module's doc).
fn check_points(doc: &Document) -> Vec<String> {
    let mut bad = Vec::new();
    let root = doc.root_element();
    let axis = value_axis(root);
    for m in root.descendants().filter(|n| {
        classes(n).contains(&"mark") && matches!(n.tag_name().name(), "circle" | "rect")
    }) {
        if m.attribute("data-ci-low").is_none() || m.attribute("data-ci-high").is_none() {
            bad.push(format!(
                "<{}> mark without its interval",
                m.tag_name().name()
            ));
        }
        if !m.parent().is_some_and(|p| classes(&p).contains(&"point")) {
            bad.push("a point's mark outside its g.point".into());
        }
    }
    for g in root
        .descendants()
        .filter(|n| n.has_tag_name("g") && classes(n).contains(&"point"))
    {
        let Some(mark) = g.children().find(|c| c.attribute("data-value").is_some()) else {
            bad.push("g.point without a mark carrying data-value".into());
            continue;
        };
        let read = |a: &str| mark.attribute(a).and_then(|v| v.parse::<f64>().ok());
        let (Some(v), Some(lo), Some(hi)) = (
            read("data-value"),
            read("data-ci-low"),
            read("data-ci-high"),
        ) else {
            bad.push(format!(
                "unreadable interval on {:?}",
                mark.attributes().collect::<Vec<_>>()
            ));
            continue;
        };
        if !(lo <= v && v <= hi) {
            bad.push(format!("interval {lo}..{hi} does not hold the value {v}"));
        }
        let hollow = mark.attribute("fill") == Some("#fff");
        match mark.attribute("data-converged") {
            Some("false") if !hollow => bad.push(format!("unconverged point {v} drawn solid")),
            Some("true") if hollow => bad.push(format!("converged point {v} drawn hollow")),
            Some("true" | "false") => {}
            other => bad.push(format!("data-converged {other:?}")),
        }
        let Some(ci) = g.children().find(|c| classes(c).contains(&"ci")) else {
            bad.push(format!("point {v} without its error bar"));
            continue;
        };
        let pts = path_points(ci);
        if pts.len() < 2 || pts.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
            bad.push(format!(
                "point {v}: unreadable error bar {:?}",
                ci.attribute("d")
            ));
            continue;
        }
        let Some((a0, a1, scale, _, vertical)) = axis else {
            bad.push("points without a value axis".into());
            continue;
        };
        let drawn = if vertical {
            (pts[1].1 - pts[0].1).abs()
        } else {
            (pts[1].0 - pts[0].0).abs()
        };
        let want = (hi.clamp(a0, a1) - lo.clamp(a0, a1)) * scale.abs();
        // Coordinates are written to two decimals.
        if (drawn - want).abs() > 0.02 + want * 1e-6 {
            bad.push(format!(
                "point {v}: error bar {drawn:.2} px long for {lo}..{hi}, which is {want:.2} px"
            ));
        }
    }
    bad
}
