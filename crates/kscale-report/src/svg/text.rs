//! Text and axis layout: the width text will take in the charts' font,
//! fitting and wrapping it, and round tick values with their labels.

use crate::format::sig;

/// The font the charts ask for first; [`text_width`] uses its metrics, and
/// the alternatives have the same or narrower ones.
pub(super) const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// Advance width of one character in DejaVu Sans, in ems.
fn char_em(c: char) -> f64 {
    match c {
        ' ' | '.' | ',' | '·' => 0.32,
        'i' | 'l' | 'j' | 'I' | 'J' | '\'' | '|' | '!' => 0.3,
        ':' | ';' | '/' | '\\' => 0.337,
        'f' | 't' | 'r' => 0.411,
        '(' | ')' | '[' | ']' | '-' => 0.39,
        'a'..='z' => match c {
            'm' => 0.974,
            'w' => 0.818,
            _ => 0.636,
        },
        '0'..='9' => 0.636,
        'A'..='Z' => match c {
            'M' | 'W' => 0.99,
            _ => 0.79,
        },
        '_' | '–' | '*' | '"' => 0.5,
        '{' | '}' | 'µ' => 0.636,
        '=' | '+' | '<' | '>' | '#' | '×' | '÷' | '~' | '^' | '±' | '&' => 0.838,
        '%' | '@' | '—' | '…' => 1.0,
        c if (c as u32) >= 0x2E80 => 1.0,
        _ => 0.8,
    }
}

/// Estimated width of `s` at `size` px; a little above DejaVu Sans's real
/// advance widths, so layouts computed with it fit in a browser.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().map(char_em).sum::<f64>() * size * 1.03
}

/// [`text_width`] for bold text.
pub fn bold_width(s: &str, size: f64) -> f64 {
    text_width(s, size) * 1.12
}

/// `s` cut to at most `max` px, ending in `…` when cut.
pub(super) fn fit(s: &str, max: f64, size: f64) -> String {
    if text_width(s, size) <= max {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut t = out.clone();
        t.push(c);
        t.push('…');
        if text_width(&t, size) > max {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// Greedy word wrap into lines of at most `max` px (measured with
/// `width`); a word longer than a line is broken where it must be.
pub(super) fn wrap_with(s: &str, max: f64, width: &dyn Fn(&str) -> f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if width(&candidate) <= max {
            cur = candidate;
            continue;
        }
        if !cur.is_empty() {
            lines.push(std::mem::take(&mut cur));
        }
        // The word alone: break it into pieces that fit.
        for c in word.chars() {
            let mut t = cur.clone();
            t.push(c);
            if width(&t) > max && !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            cur.push(c);
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

pub(super) fn wrap(s: &str, max: f64, size: f64) -> Vec<String> {
    wrap_with(s, max, &|t| text_width(t, size))
}

/// Tick label: integers without decimals, others with three significant
/// digits (more when neighbouring ticks would otherwise read the same).
pub(super) fn tick_label(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 && step.fract() == 0.0 {
        return format!("{v:.0}");
    }
    // Enough digits to tell v from v ± step, without trailing zeros.
    let digits = if step > 0.0 && step.is_finite() {
        ((v.abs().log10().floor() - step.log10().floor()) as i64 + 1).clamp(3, 15) as usize
    } else {
        3
    };
    let s = sig(v, digits);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Round tick values whose first is at or below `lo` and last at or above
/// `hi`, about `n` intervals apart, and their step.
pub(super) fn ticks(lo: f64, hi: f64, n: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        // One value: a unit (or its own size) around it.
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.5 };
        (lo - d * f64::from(u8::from(lo < 0.0)), lo + d)
    } else {
        (0.0, 1.0)
    };
    let raw = (hi - lo) / n.max(1) as f64;
    let pow = raw.log10().floor() as i32;
    let mag = 10f64.powi(pow);
    let mult = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * mag >= raw)
        .unwrap_or(10.0);
    let step = mult * mag;
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    // Ranges too narrow for their magnitude (or too wide for f64) keep
    // their ends as the only ticks.
    if !(step.is_finite() && step > 0.0 && first + 1.0 > first && last - first <= 1000.0) {
        return (vec![lo, hi], hi - lo);
    }
    // k steps, computed so decimal ticks come out as written (0.6, not
    // 0.6000000000000001): dividing by an exact power of ten rounds right.
    let clean = |k: f64| {
        let v = if pow >= 0 {
            k * mult * mag
        } else {
            k * mult / 10f64.powi(-pow)
        };
        if v == 0.0 {
            0.0
        } else {
            v
        }
    };
    let mut v: Vec<f64> = Vec::new();
    let mut k = first;
    while k <= last + 0.5 && v.len() < 1000 {
        v.push(clean(k));
        k += 1.0;
    }
    if v.first().is_some_and(|f| *f > lo) {
        v.insert(0, clean(first - 1.0).min(lo));
    }
    if v.last().is_some_and(|l| *l < hi) {
        v.push(clean(last + 1.0).max(hi));
    }
    (v, step)
}
