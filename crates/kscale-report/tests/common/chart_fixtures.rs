//! Charts the report tests draw more than once.

use kscale_report::svg::{LineChart, Series};

/// ctx.lat's latency against procs on a log axis, with these lines.
pub fn ctx_lat(series: Vec<Series>) -> LineChart {
    LineChart {
        title: "Context switching latency (ctx.lat)".into(),
        x_label: "procs".into(),
        y_label: "latency (µs)".into(),
        log_x: true,
        series,
    }
}
