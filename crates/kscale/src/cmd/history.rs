//! `kscale history TARGET…`: a case's result across the stored runs, one
//! row a run (docs/history.md). The selection of cases and runs and their
//! order are shared with `kscale changes`, which looks for the shifts in
//! the same series.

use crate::engine::gate;
use crate::error::user;
use crate::output::{csv_record, print, Format, Json};
use anyhow::Result;
use kscale_core::cpus::base_name;
use kscale_report::format::sig;
use kscale_report::history::{run_cells, run_headings, HistoryPoint};
use kscale_report::{Cell, RowKind, Table, Tone};
use kscale_store::series::{SeriesRun, Stored};
use kscale_store::{CaseData, Store};
use serde::Serialize;
use serde_json::json;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Confidence of every interval `history` and `changes` show.
pub const CONFIDENCE_PCT: f64 = 95.0;

#[derive(clap::Args)]
#[command(
    after_help = "How series are built and ordered, and how changes are found: docs/history.md.

Examples:
  kscale history syscall.null --cpus 1              one workload on 1 CPU, oldest run first
  kscale history mem.rd:size=8m --order kernel      by kernel release
  kscale history syscall --host lab1 --since 2025-01-01 --format csv"
)]
pub struct Args {
    #[command(flatten)]
    pub select: Select,
    /// First measure the targets (`run TARGET… --quick`) in this kernel image booted in QEMU
    /// (`kscale vm`), so that a series of kernels lands here run by run (docs/vm.md).
    #[arg(long, value_name = "IMAGE")]
    kernel: Option<PathBuf>,
    /// Output format: terminal, json or csv.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
}

/// The `run` a guest measures for `history --kernel`: each target's
/// workload or family, its params as `--param`, quick sweeps, and the
/// `--cpus` filter where one is given.
fn guest_run(select: &Select) -> Vec<String> {
    let mut out = vec!["run".to_string()];
    let mut params = Vec::new();
    for t in &select.targets {
        let (what, ps) = t.split_once(':').unwrap_or((t, ""));
        out.push(what.to_string());
        params.extend(ps.split(',').filter(|p| !p.is_empty()).map(String::from));
    }
    for p in params {
        out.extend(["--param".to_string(), p]);
    }
    if let Some(c) = &select.runs.cpus {
        out.extend(["--cpus".to_string(), c.clone()]);
    }
    out.push("--quick".into());
    out
}

/// Which cases, over which runs, in which order.
#[derive(clap::Args)]
pub struct Select {
    /// Families (`syscall`) or workloads, optionally with params
    /// (`mem.rd:size=8m`).
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub runs: RunFilter,
}

/// The options that narrow and order a selection's series, apart from its
/// targets, so that `report --history` can take its targets by its own
/// flag and still read these the same way.
#[derive(clap::Args)]
pub struct RunFilter {
    /// Only this CPU configuration (as named in the runs: `1`, `all`, `0-1`).
    #[arg(long, value_name = "NAME")]
    pub cpus: Option<String>,
    /// This metric (`p99`, `sd_server`…) instead of each case's primary one.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// Order of the runs: start time; label or kernel release, version-sorted
    /// (6.8-rc1 before 6.8); git: the runs of each commit together (the
    /// kernel release's -gHASH, else kscale's revision), commits in the
    /// order they were first measured.
    #[arg(long, value_enum, default_value = "time")]
    pub order: Order,
    /// Only runs measured on this host (the snapshot's host name).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Only runs whose label matches this glob (`*` any text, `?` one character).
    #[arg(long, value_name = "PATTERN")]
    pub label: Option<String>,
    /// Only runs started on or after this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only runs started on or before this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    Time,
    Label,
    Kernel,
    Git,
}

impl Order {
    /// What the runs are sorted by, in words for a chart's axis.
    pub fn words(self) -> &'static str {
        match self {
            Order::Time => "start time",
            Order::Label => "label",
            Order::Kernel => "kernel release",
            Order::Git => "commit",
        }
    }
}

/// One run of a series: what the history report draws (the case's result
/// and its interval, by its run rule and estimator; converged: ended by its
/// run rule), and the case it came from.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    #[serde(flatten)]
    pub at: HistoryPoint,
    #[serde(skip)]
    pub case: CaseData,
    #[serde(skip)]
    pub profiled: Vec<String>,
}

impl std::ops::Deref for Point {
    type Target = HistoryPoint;
    fn deref(&self) -> &HistoryPoint {
        &self.at
    }
}

impl Point {
    /// The metric's counted trial values.
    pub fn trials(&self, metric: &str) -> Vec<f64> {
        self.case.values(metric)
    }
}

/// One case (workload, params, CPU configuration) across runs.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    /// The case and its metric, as a regression gate names them.
    #[serde(flatten)]
    pub case: gate::Target,
    pub points: Vec<Point>,
}

impl Series {
    /// `mem.rd size=4k [1]`.
    pub fn title(&self) -> String {
        let params: Vec<String> = self
            .case
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut t = self.case.workload.clone();
        if !params.is_empty() {
            t.push(' ');
            t.push_str(&params.join(","));
        }
        format!("{t} [{}]", self.case.cpus)
    }
}

/// A target: its workloads and the params a case must have.
struct Target {
    workloads: Vec<String>,
    params: Vec<(String, String)>,
}

fn target(spec: &str) -> Result<Target> {
    let (w, params) = super::profile::parse_case(spec)?;
    let workloads = if let Some(f) = kscale_workloads::family(&w) {
        if !params.is_empty() {
            return Err(user(format!(
                "bad target `{spec}`: params need a workload, e.g. {}.{}:…",
                f.name,
                f.workloads.first().map_or("x", |x| x.name)
            )));
        }
        f.workloads.iter().map(|x| x.id()).collect()
    } else if kscale_workloads::find(&w).is_some() || w.contains('.') {
        // A workload no longer in the catalogue may still be stored.
        vec![w]
    } else {
        return Err(user(format!(
            "unknown target `{spec}`: give a family or a workload (`kscale list`), optionally with params, e.g. mem.rd:size=8m"
        )));
    };
    Ok(Target { workloads, params })
}

/// `YYYY-MM-DD` as checked text (the stored times are RFC 3339 UTC and
/// compare as text).
fn day(flag: &str, s: &str) -> Result<String> {
    let b = s.as_bytes();
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && s.bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && s[5..7].parse::<u32>().is_ok_and(|m| (1..=12).contains(&m))
        && s[8..10].parse::<u32>().is_ok_and(|d| (1..=31).contains(&d));
    if ok {
        Ok(s.to_string())
    } else {
        Err(user(format!(
            "bad {flag} `{s}`: expected a day as YYYY-MM-DD, e.g. 2025-03-01"
        )))
    }
}

/// Shell-style glob: `*` any text, `?` one character, the rest literal.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Version order: digit runs compare as numbers, other text as text, and a
/// pre-release (`-rc1`) comes before the release it precedes.
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[i - 1].is_ascii_digit() {
                out.push(&s[start..i]);
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x.parse::<u128>(), y.parse::<u128>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    let pre = |rest: &[&str]| {
        rest.first()
            .is_some_and(|c| c.starts_with("-rc") || c.starts_with('~'))
    };
    match ca.len().cmp(&cb.len()) {
        Ordering::Greater if pre(&ca[cb.len()..]) => Ordering::Less,
        Ordering::Less if pre(&cb[ca.len()..]) => Ordering::Greater,
        o => o,
    }
}

/// The commit a run measured: the `-gHASH` a kernel built from git carries
/// in its release (CONFIG_LOCALVERSION_AUTO), else kscale's own revision.
pub fn commit(run: &SeriesRun) -> String {
    run.kernel
        .as_deref()
        .and_then(|k| {
            k.split('-').find(|p| {
                p.len() > 7 && p.starts_with('g') && p[1..].bytes().all(|c| c.is_ascii_hexdigit())
            })
        })
        .map(|g| g[1..].to_string())
        .unwrap_or_else(|| run.git_rev.clone())
}

fn order_runs(points: &mut [Point], order: Order) {
    let by_time = |a: &Point, b: &Point| {
        a.run
            .started_at
            .cmp(&b.run.started_at)
            .then(a.run.id.cmp(&b.run.id))
    };
    match order {
        Order::Time => points.sort_by(by_time),
        Order::Label => {
            points.sort_by(|a, b| version_cmp(&a.run.label, &b.run.label).then(by_time(a, b)))
        }
        Order::Kernel => points.sort_by(|a, b| {
            let k = |p: &Point| p.run.kernel.clone().unwrap_or_default();
            version_cmp(&k(a), &k(b)).then(by_time(a, b))
        }),
        Order::Git => {
            points.sort_by(by_time);
            let mut first: BTreeMap<String, usize> = BTreeMap::new();
            for (i, p) in points.iter().enumerate() {
                first.entry(commit(&p.run)).or_insert(i);
            }
            // Stable: within a commit, by time.
            points.sort_by_key(|p| first[&commit(&p.run)]);
        }
    }
}

impl Select {
    /// The series the selection names, each in the asked order; an error
    /// (status 2) for bad flags or when nothing is stored for them.
    pub fn series(&self, store: &Store) -> Result<Vec<Series>> {
        self.runs.series(&self.targets, store)
    }
}

impl RunFilter {
    /// The first of these options given, for a command where they do not
    /// apply; `--order time` is the default and passes unseen.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            ("--cpus", self.cpus.is_some()),
            ("--metric", self.metric.is_some()),
            ("--order", self.order != Order::Time),
            ("--host", self.host.is_some()),
            ("--label", self.label.is_some()),
            ("--since", self.since.is_some()),
            ("--until", self.until.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The options given, as they were typed (` --cpus 1 --order kernel`),
    /// to name the selection in a report's title.
    pub fn flags(&self) -> String {
        let mut out = String::new();
        let mut add = |flag: &str, v: Option<&str>| {
            if let Some(v) = v {
                out.push_str(&format!(" {flag} {v}"));
            }
        };
        add("--cpus", self.cpus.as_deref());
        add("--metric", self.metric.as_deref());
        add(
            "--order",
            match self.order {
                Order::Time => None,
                Order::Label => Some("label"),
                Order::Kernel => Some("kernel"),
                Order::Git => Some("git"),
            },
        );
        add("--host", self.host.as_deref());
        add("--label", self.label.as_deref());
        add("--since", self.since.as_deref());
        add("--until", self.until.as_deref());
        out
    }

    /// The series of `targets` (every stored case when empty) over the
    /// runs these options keep, each in their order; an error (status 2)
    /// for bad flags or when nothing is stored for them.
    pub fn series(&self, target_specs: &[String], store: &Store) -> Result<Vec<Series>> {
        let targets: Vec<Target> = if target_specs.is_empty() {
            vec![Target {
                workloads: kscale_workloads::workloads().map(|w| w.id()).collect(),
                params: Vec::new(),
            }]
        } else {
            target_specs
                .iter()
                .map(|t| target(t))
                .collect::<Result<_>>()?
        };
        let since = self
            .since
            .as_deref()
            .map(|s| day("--since", s))
            .transpose()?;
        let until = self
            .until
            .as_deref()
            .map(|s| day("--until", s))
            .transpose()?;
        let mut workloads: Vec<String> = targets.iter().flat_map(|t| t.workloads.clone()).collect();
        workloads.sort();
        workloads.dedup();
        let Stored { runs, cases } = store.series(&workloads)?;
        let run_ok = |r: &SeriesRun| {
            self.host.as_ref().is_none_or(|h| r.hostname.as_ref() == Some(h))
                && self.label.as_ref().is_none_or(|g| glob(g, &r.label))
                && since.as_ref().is_none_or(|s| r.started_at.as_str() >= s.as_str())
                // A day's runs start before the next day; 'T' follows the date.
                && until.as_ref().is_none_or(|u| r.started_at.get(..10).is_some_and(|d| d <= u.as_str()))
        };
        let mut by_case: BTreeMap<(String, String, String), Series> = BTreeMap::new();
        for sc in cases {
            let c = sc.case;
            let wanted = targets.iter().any(|t| {
                t.workloads.contains(&c.key.workload)
                    && t.params.iter().all(|(k, v)| c.key.params.get(k) == Some(v))
            });
            let cpus = base_name(&c.key.cpus).to_string();
            if !wanted || self.cpus.as_deref().is_some_and(|n| base_name(n) != cpus) {
                continue;
            }
            let Some(run) = runs.get(&sc.run_id).filter(|r| run_ok(r)) else {
                continue;
            };
            let Some(m) = c.metric_or_primary(self.metric.as_deref()).cloned() else {
                continue;
            };
            let s = c.summary(&m.name, CONFIDENCE_PCT);
            if s.n == 0 || !s.mean.is_finite() {
                continue;
            }
            let key = (c.key.workload.clone(), c.key.params_json(), cpus.clone());
            let series = by_case.entry(key).or_insert_with(|| Series {
                case: gate::Target {
                    workload: c.key.workload.clone(),
                    params: c.key.params.clone(),
                    cpus,
                    metric: m.name.clone(),
                    unit: m.unit.clone(),
                    direction: m.direction,
                },
                points: Vec::new(),
            });
            series.points.push(Point {
                at: HistoryPoint {
                    run: run.clone(),
                    value: s.mean,
                    ci_low: s.ci_low,
                    ci_high: s.ci_high,
                    n: s.n,
                    converged: c.settled(),
                },
                profiled: sc.profiled,
                case: c,
            });
        }
        if by_case.is_empty() {
            return Err(user(format!(
                "no stored run has {}{}{} (`kscale results` lists the runs)",
                if target_specs.is_empty() {
                    "a measured case".to_string()
                } else {
                    format!("a measured case of {}", target_specs.join(", "))
                },
                self.metric
                    .as_deref()
                    .map(|m| format!(" with metric {m}"))
                    .unwrap_or_default(),
                if self.cpus.is_some()
                    || self.host.is_some()
                    || self.label.is_some()
                    || since.is_some()
                    || until.is_some()
                {
                    " among the runs the filters keep"
                } else {
                    ""
                }
            )));
        }
        let mut out: Vec<Series> = by_case.into_values().collect();
        for s in &mut out {
            order_runs(&mut s.points, self.order);
        }
        Ok(out)
    }
}

/// `value [low, high]` cells and CSV fields share this.
fn num(x: f64) -> String {
    sig(x, 4)
}

fn table(s: &Series) -> Table {
    let title = format!(
        "{} — {} ({}, {} is better)",
        s.title(),
        s.case.metric,
        s.case.unit,
        s.case.direction
    );
    let mut t = Table::new(
        title,
        run_headings("run")
            .into_iter()
            .chain(["value", "95% interval", "n", "converged"].map(String::from))
            .collect(),
    );
    for p in &s.points {
        let mut row = run_cells(&p.run).to_vec();
        row.extend([
            Cell::new(num(p.value)),
            Cell::new(format!("[{}, {}]", num(p.ci_low), num(p.ci_high))),
            Cell::new(p.n.to_string()),
            if p.converged {
                Cell::new("yes")
            } else {
                Cell::tone("no", Tone::Warn)
            },
        ]);
        t.push(RowKind::Data, row);
    }
    let emulated: Vec<&str> = s
        .points
        .iter()
        .filter_map(|p| p.run.vm.as_deref().filter(|v| v.starts_with("TCG")))
        .collect();
    if let Some(tag) = emulated.first() {
        t.notes.push(format!(
            "({tag} …): emulated (TCG): not the kernel's speed; runs booted by kscale vm under QEMU's emulator, beside native runs only for their kind of change (docs/vm.md)."
        ));
    }
    t
}

fn csv(series: &[Series]) -> String {
    let mut out = String::from(
        "workload,params,cpus,metric,unit,direction,run_id,label,started_at,host,kernel,commit,value,ci_low,ci_high,n,converged\n",
    );
    for s in series {
        let params: Vec<String> = s
            .case
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for p in &s.points {
            let fields = [
                s.case.workload.clone(),
                params.join(" "),
                s.case.cpus.clone(),
                s.case.metric.clone(),
                s.case.unit.clone(),
                s.case.direction.to_string(),
                p.run.id.to_string(),
                p.run.label.clone(),
                p.run.started_at.clone(),
                p.run.hostname.clone().unwrap_or_default(),
                p.run.kernel.clone().unwrap_or_default(),
                commit(&p.run),
                p.value.to_string(),
                p.ci_low.to_string(),
                p.ci_high.to_string(),
                p.n.to_string(),
                p.converged.to_string(),
            ];
            out.push_str(&csv_record(&fields));
        }
    }
    out
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    if args.select.targets.is_empty() {
        return Err(user(
            "history needs at least one TARGET: a family or a workload, e.g. `kscale history syscall.null`",
        ));
    }
    let format = args
        .format
        .accepted("history", &[Format::Terminal, Format::Json, Format::Csv])?;
    let store = match &args.kernel {
        Some(k) => {
            let store = super::open_store(db)?;
            super::vm::measure_in(&store, k, &guest_run(&args.select), None)?;
            store
        }
        None => super::open_existing(db)?,
    };
    let series = args.select.series(&store)?;
    match format {
        Format::Json => print(&Json.document(&json!(series))?)?,
        Format::Csv => print(&csv(&series))?,
        // md was refused above.
        Format::Terminal | Format::Md => {
            let tables: Vec<Table> = series.iter().map(table).collect();
            print(&format.exporter().tables(&tables))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("v6.*", "v6.8"));
        assert!(glob("*rc?", "6.8-rc1"));
        assert!(!glob("*rc?", "6.8-rc10"));
        assert!(glob("lab", "lab"));
        assert!(!glob("lab", "lab1"));
        assert!(glob("*", ""));
    }

    #[test]
    fn versions_sort_numerically_with_release_candidates_first() {
        let mut v = vec![
            "6.10.0",
            "6.8.0",
            "6.8.0-rc1",
            "6.9.2",
            "6.8.0-rc10",
            "6.8.0-rc2",
        ];
        v.sort_by(|a, b| version_cmp(a, b));
        assert_eq!(
            v,
            [
                "6.8.0-rc1",
                "6.8.0-rc2",
                "6.8.0-rc10",
                "6.8.0",
                "6.9.2",
                "6.10.0"
            ]
        );
    }

    #[test]
    fn a_git_built_kernel_names_its_commit() {
        let run = |kernel: &str| SeriesRun {
            id: 1,
            label: "x".into(),
            started_at: String::new(),
            git_rev: "0123abcd4567".into(),
            hostname: None,
            kernel: Some(kernel.into()),
            kernel_version: None,
            vm: None,
        };
        assert_eq!(
            commit(&run("6.9.0-rc3-00042-gdeadbeef1234")),
            "deadbeef1234"
        );
        assert_eq!(commit(&run("6.8.0-generic")), "0123abcd4567");
    }

    #[test]
    fn days_are_checked() {
        assert!(day("--since", "2025-03-01").is_ok());
        for bad in [
            "2025-3-1",
            "2025-13-01",
            "yesterday",
            "2025-03-01T00:00:00Z",
        ] {
            assert!(day("--since", bad).is_err(), "{bad}");
        }
    }
}
