//! Charts the report tests draw more than once.

use kscale_report::svg::{LineChart, Point, Series};

/// ctx.lat's latency against procs on a log axis, with these lines.
pub fn ctx_lat(series: Vec<Series>) -> LineChart {
    LineChart {
        title: "Context switching latency (ctx.lat)".into(),
        x_label: "procs".into(),
        y_label: "latency (µs)".into(),
        log_x: true,
        series,
        ..Default::default()
    }
}

/// Points of (x, value) with ±5 % intervals, converged.
#[allow(dead_code)]
pub fn pts(v: &[(f64, f64)]) -> Vec<(f64, Point)> {
    v.iter()
        .map(|(x, y)| (*x, Point::new(*y, y * 0.95, y * 1.05, true)))
        .collect()
}
