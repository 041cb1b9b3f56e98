//! Families that do not exist yet get their figures from their definitions
//! alone: this test declares the macro families' charts and tables the way
//! their workload files will (x param, log or linear, metrics, series
//! params, variants) in a stand-in catalogue, and checks the report draws
//! the seed's figures from them — transactions/s and p99 latency against
//! connections, Mbit/s against message size, messages/s against rooms a
//! line per mode, four web charts, MB/s against clients — with no line of
//! kscale-report written for them.

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/svgcheck.rs"]
mod svgcheck;

use common::run_with;
use kscale_core::profile::{Hit, ProfileBuilder};
use kscale_core::Direction;
use kscale_report::html::{build, render, Report};
use kscale_report::staircase::{self, StepData};
use kscale_report::svg::Chart;
use kscale_report::variants::variant_tables;
use kscale_report::{
    Catalog, ChartSpec, MetricInfo, ParamInfo, ParamScale, VariantsSpec, WorkloadInfo,
};
use kscale_store::{CaseData, RunData};

struct Cat;

fn param(name: &str, scale: ParamScale) -> ParamInfo {
    ParamInfo {
        name: name.into(),
        scale,
    }
}

fn metric(name: &str, unit: &str) -> MetricInfo {
    MetricInfo {
        name: name.into(),
        unit: unit.into(),
    }
}

fn chart(x: &str, log_x: bool, metrics: &[&str], series: &[&str]) -> ChartSpec {
    ChartSpec {
        x: x.into(),
        log_x,
        metrics: metrics.iter().map(|s| s.to_string()).collect(),
        series: series.iter().map(|s| s.to_string()).collect(),
    }
}

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        let (title, params, metrics, charts, variants) = match id {
            "net.tcp_rr" => (
                "TCP request/response",
                vec![
                    param("conns", ParamScale::Number),
                    param("req", ParamScale::Bytes),
                ],
                vec![metric("tps", "transactions/s"), metric("p99", "µs")],
                vec![chart("conns", true, &["tps", "p99"], &[])],
                None,
            ),
            "net.tcp_stream" => (
                "TCP stream",
                vec![param("msg", ParamScale::Bytes)],
                vec![metric("throughput", "Mbit/s")],
                vec![chart("msg", true, &[], &[])],
                None,
            ),
            "chat.relay" => (
                "Chat relay",
                vec![
                    param("rooms", ParamScale::Number),
                    param("mode", ParamScale::Label),
                    param("users", ParamScale::Number),
                ],
                vec![metric("messages", "messages/s")],
                vec![chart("rooms", false, &[], &["mode"])],
                Some(VariantsSpec {
                    title: "Server modes".into(),
                    param: "mode".into(),
                    heading: "Mode".into(),
                    metrics: vec![("messages".into(), String::new())],
                    baseline: "threads".into(),
                    note: String::new(),
                }),
            ),
            "web.mix" => (
                "Web serving",
                vec![param("conns", ParamScale::Number)],
                vec![
                    metric("conforming", "connections"),
                    metric("bitrate", "kbit/s"),
                    metric("latency", "ms"),
                    metric("ops", "ops/s"),
                    metric("server_cpu", "%"),
                ],
                vec![chart(
                    "conns",
                    false,
                    &["bitrate", "latency", "ops", "server_cpu"],
                    &[],
                )],
                None,
            ),
            "fileserver.mix" => (
                "File server",
                vec![param("clients", ParamScale::Count)],
                vec![metric("throughput", "MB/s")],
                vec![chart("clients", true, &[], &[])],
                None,
            ),
            _ => return None,
        };
        let family = id.split('.').next().unwrap_or(id);
        Some(WorkloadInfo {
            id: id.into(),
            family: family.into(),
            family_title: family.into(),
            title: title.into(),
            params,
            metrics,
            geomean_over: None,
            charts,
            variants,
        })
    }
    fn family_order(&self) -> Vec<String> {
        ["net", "chat", "web", "fileserver"]
            .map(String::from)
            .to_vec()
    }
}

/// A done case whose trials give each metric about its value.
fn case(
    id: i64,
    workload: &str,
    params: &[(&str, &str)],
    cpus: &str,
    metrics: &[(&str, &str, f64)],
) -> CaseData {
    let trials = (0..4)
        .map(|i| {
            metrics
                .iter()
                .map(|(m, _, v)| (m.to_string(), v * (1.0 + 0.01 * i as f64)))
                .collect()
        })
        .collect();
    let rows = metrics
        .iter()
        .enumerate()
        .map(|(i, (m, u, _))| common::metric(m, u, Direction::Higher, i == 0))
        .collect();
    common::case(id, workload, params, cpus, rows, trials)
}

fn system(id: i64, label: &str, speed: f64) -> RunData {
    let mut cases = Vec::new();
    let mut n = 0;
    let mut push = |c: CaseData| {
        cases.push(c);
    };
    for cpus in ["1", "all"] {
        for conns in ["1", "4", "16"] {
            let k: f64 = conns.parse().unwrap();
            n += 1;
            push(case(
                n,
                "net.tcp_rr",
                &[("conns", conns), ("req", "4")],
                cpus,
                &[
                    ("tps", "transactions/s", speed * 20000.0 * k.sqrt()),
                    ("p99", "µs", 50.0 * k / speed),
                ],
            ));
            n += 1;
            push(case(
                n,
                "web.mix",
                &[("conns", &(k * 50.0).to_string())],
                cpus,
                &[
                    ("conforming", "connections", k * 50.0),
                    ("bitrate", "kbit/s", 400.0 / k.sqrt()),
                    ("latency", "ms", 2.0 * k),
                    ("ops", "ops/s", 1000.0 * k),
                    ("server_cpu", "%", 10.0 * k),
                ],
            ));
        }
        for msg in ["1k", "16k", "64k"] {
            n += 1;
            push(case(
                n,
                "net.tcp_stream",
                &[("msg", msg)],
                cpus,
                &[("throughput", "Mbit/s", speed * 9000.0)],
            ));
        }
        for clients in ["1", "ncpus"] {
            n += 1;
            push(case(
                n,
                "fileserver.mix",
                &[("clients", clients)],
                cpus,
                &[("throughput", "MB/s", speed * 300.0)],
            ));
        }
    }
    for mode in ["threads", "epoll"] {
        for rooms in ["1", "5", "10"] {
            n += 1;
            let r: f64 = rooms.parse().unwrap();
            push(case(
                n,
                "chat.relay",
                &[("rooms", rooms), ("mode", mode), ("users", "20")],
                "1",
                &[("messages", "messages/s", speed * 1e5 / r.sqrt())],
            ));
        }
    }
    let mut run = run_with(cases);
    run.run.id = id;
    run.run.label = label.into();
    run
}

fn line_charts(r: &Report) -> Vec<&kscale_report::svg::LineChart> {
    r.charts()
        .into_iter()
        .filter_map(|c| match c {
            Chart::Line(l) => Some(l),
            _ => None,
        })
        .filter(|l| !l.title.contains("scalability"))
        .collect()
}

#[test]
fn macro_families_chart_from_their_definitions() {
    let (a, b) = (system(1, "6.1", 1.0), system(2, "6.8", 1.3));
    let report = build(&[&a, &b], &Cat);
    let charts = line_charts(&report);
    let find = |t: &str| {
        charts
            .iter()
            .find(|c| c.title.contains(t))
            .unwrap_or_else(|| {
                panic!(
                    "no chart {t}: {:?}",
                    charts.iter().map(|c| &c.title).collect::<Vec<_>>()
                )
            })
    };
    let names = |c: &kscale_report::svg::LineChart| {
        c.series.iter().map(|s| s.name.clone()).collect::<Vec<_>>()
    };

    // Seed 000 figure 4: transactions/s against connections, a line per
    // system × CPU configuration; and p99 latency against connections.
    let tps = find("(net.tcp_rr) — tps");
    assert!(tps.log_x);
    assert_eq!(tps.x_label, "conns");
    assert_eq!(tps.y_label, "tps (transactions/s)");
    assert_eq!(
        names(tps),
        [
            "6.1 [1 CPU]",
            "6.1 [all (2 CPUs)]",
            "6.8 [1 CPU]",
            "6.8 [all (2 CPUs)]"
        ]
    );
    assert_eq!(tps.series[0].points.len(), 3);
    assert!(tps.title.contains("req=4"), "constant params in the title");
    let p99 = find("(net.tcp_rr) — p99");
    assert_eq!(p99.y_label, "p99 (µs)");

    // Stream throughput against message size, sizes in KB.
    let stream = find("(net.tcp_stream)");
    assert_eq!(stream.x_label, "msg (KB)");
    assert_eq!(stream.y_label, "throughput (Mbit/s)");
    let xs: Vec<f64> = stream.series[0].points.iter().map(|p| p.0).collect();
    assert_eq!(xs, [1.0, 16.0, 64.0]);

    // Messages/s against rooms, a line per system × mode.
    let chat = find("(chat.relay)");
    assert!(!chat.log_x);
    assert_eq!(
        names(chat),
        [
            "mode=threads 6.1 [1 CPU]",
            "mode=epoll 6.1 [1 CPU]",
            "mode=threads 6.8 [1 CPU]",
            "mode=epoll 6.8 [1 CPU]",
        ]
    );

    // Web: bit rate per connection, latency, ops/s and server CPU against
    // connections — four charts.
    for (m, unit) in [
        ("bitrate", "kbit/s"),
        ("latency", "ms"),
        ("ops", "ops/s"),
        ("server_cpu", "%"),
    ] {
        let c = find(&format!("(web.mix) — {m}"));
        assert_eq!(c.x_label, "conns");
        assert_eq!(c.y_label, format!("{m} ({unit})"));
        assert_eq!(c.series.len(), 4);
    }
    assert!(!charts.iter().any(|c| c.title.contains("conforming")));

    // MB/s against clients; `ncpus` counts the configuration's CPUs.
    let fsrv = find("(fileserver.mix)");
    assert_eq!(fsrv.y_label, "throughput (MB/s)");
    let all = fsrv
        .series
        .iter()
        .find(|s| s.name == "6.1 [all (2 CPUs)]")
        .unwrap();
    assert_eq!(
        all.points.iter().map(|p| p.0).collect::<Vec<_>>(),
        [1.0, 2.0]
    );

    // Every chart drawn keeps its geometry.
    for c in report.charts() {
        let svg = c.to_svg();
        assert!(svgcheck::check(&svg, None).is_empty(), "{svg}");
    }
}

/// A param the definition does not list as a series that varies gets a
/// chart per value instead of more lines.
#[test]
fn unlisted_varying_params_split_charts() {
    let mut a = system(1, "6.1", 1.0);
    let extra: Vec<CaseData> = a
        .cases
        .iter()
        .filter(|c| c.key.workload == "chat.relay")
        .map(|c| {
            let mut c = c.clone();
            c.id += 1000;
            c.key.params.insert("users".into(), "40".into());
            c
        })
        .collect();
    a.cases.extend(extra);
    let report = build(&[&a], &Cat);
    let chats: Vec<_> = line_charts(&report)
        .into_iter()
        .filter(|c| c.title.contains("(chat.relay)"))
        .collect();
    assert_eq!(chats.len(), 2, "a chart per users value");
    assert!(chats[0].title.contains("users=20") && chats[1].title.contains("users=40"));
    assert_eq!(chats[0].series.len(), 2, "a line per mode");
}

/// The variant table another family declares: rows per mode, its metric,
/// compared with the declared baseline.
#[test]
fn another_family_declares_a_variant_table() {
    let a = system(1, "6.1", 1.0);
    let tables = variant_tables(&a, &Cat, None);
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t.title, "Server modes (chat), compared to threads");
    assert_eq!(t.headers[0], "Mode");
    assert_eq!(t.headers[1], "1 CPU messages/s");
    assert_eq!(t.headers[2], "vs threads");
    let text = t.to_terminal(false);
    assert!(text.contains("Chat relay rooms=5 users=20"), "{text}");
    assert!(text.contains("epoll"), "{text}");
}

/// A kernel profile of `samples` samples, a tenth of them spinning.
fn profile(samples: u64) -> kscale_core::profile::Profile {
    let mut b = ProfileBuilder::new("cpu-clock", "997 Hz");
    for (symbol, n) in [
        ("do_syscall_64", samples * 6 / 10),
        ("native_queued_spin_lock_slowpath", samples / 10),
    ] {
        b.add_n(
            Hit::Kernel {
                symbol: Some(symbol),
                comm: "kscale",
            },
            n,
        );
    }
    b.add_n(Hit::User { comm: "kscale" }, samples - samples * 7 / 10);
    b.finish()
}

/// Every chart of a report like a study's — the macro sweeps, comparison
/// bars, scalability lines, the spin-lock bars of the profiles and a tuning
/// staircase, with unconverged cases, a case of one trial and profiles of
/// too few samples among them — draws each measured point with its interval,
/// hollow where it did not converge; checked on the markup and, laid out by
/// Chromium, on what the browser drew.
#[test]
fn a_study_report_draws_every_interval_in_a_browser() {
    let (mut a, b) = (system(1, "6.1", 1.0), system(2, "6.8", 1.3));
    // Not converged: hollow. One counted trial: an unbounded interval.
    a.cases[0].converged = Some(false);
    a.cases[3].converged = Some(false);
    a.cases[4].trials.truncate(2);
    a.cases[4].converged = Some(false);
    for (i, c) in a.cases.iter_mut().enumerate().take(6) {
        c.profiles = vec![profile(if i % 2 == 0 { 52 } else { 5000 })];
    }
    let mut report = build(&[&a, &b], &Cat);
    let step = |name: &str, run: &RunData| StepData {
        name: name.into(),
        rationale: format!("why {name}"),
        settings: vec![],
        run: Some(run_with(run.cases[..2].to_vec())),
        error: None,
        measured: staircase::Measured::Interleaved { seed: Some(7) },
    };
    let steps = [
        step("baseline", &a),
        step("sockbuf", &b),
        step("baseline-again", &a),
    ];
    report.sections.insert(0, staircase::section(&steps, &Cat));
    let html = render(&report).expect("render");

    let kinds = ["line", "bar", "column"];
    for kind in kinds {
        assert!(
            html.contains(&format!("data-kind=\"{kind}\"")),
            "no {kind} chart"
        );
    }
    let mut points = 0;
    for c in report.charts() {
        let svg = c.to_svg();
        let bad = svgcheck::check(&svg, None);
        assert!(bad.is_empty(), "{}: {bad:#?}", c.title());
        points += svg.matches("<g class=\"point\">").count();
    }
    assert!(points > 100, "{points} points");
    assert_eq!(html.matches("<g class=\"point\">").count(), points);
    assert!(html.contains("data-converged=\"false\""), "no hollow point");
    assert!(
        html.contains("data-ci-high=\"Infinity\""),
        "the one-trial case"
    );
    assert!(html.contains("hollow: a profile of fewer than 1,000 samples"));
    assert!(html.contains("from 52 samples — too few for a stable ranking"));

    let Some(dom) = browser::dom(&html, "study") else {
        return;
    };
    browser::assert_laid_out_whole(&dom, report.chart_count(), points);

    // The browser's check sees an interval drawn shorter than it is (the
    // first point's), and an error bar gone (the last point's).
    let i = html.find(" data-ci-high=\"").expect("a point") + 15;
    let broken = format!("{}1e9{}", &html[..i], &html[i..]);
    let j = broken
        .rfind("<path class=\"ci mark\"")
        .expect("an error bar");
    let broken = format!("{}<path class=\"mark\"{}", &broken[..j], &broken[j + 21..]);
    let dom = browser::dom(&broken, "broken").expect("chromium");
    assert_eq!(
        browser::attr_num(&dom, "data-interval-problems"),
        Some(2),
        "{:?}",
        browser::attr(&dom, "data-interval-report")
    );
}
