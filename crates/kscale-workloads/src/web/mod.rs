//! `web`: SPECweb99-style web serving (seeds 000 and 004, docs/families/web.md).
//!
//! The server role runs a web server confined to the CPU configuration —
//! kscale's own (`web.own`, [`server`], in a thread-pool and an epoll
//! design) or Debian's nginx (`web.nginx`, [`nginx`]) — serving a generated
//! SPECweb99 file set ([`fileset`]) from the run's scratch directory. The load role is kscale's own HTTP/1.1 generator:
//! `conns` keep-alive connections, each throttled to `rate` kbit/s like
//! SPECweb99's clients, issuing the SPECweb99 request mix. A connection is
//! *conforming* when it sustains at least 80 % of the throttle (320 of 400
//! kbit/s) with under 1 % errors; the count of conforming connections is the
//! primary metric, as it was SPECweb99's. The generator ([`load`]) and the
//! mix ([`mix`]) are the same for every server.
//!
//! nginx is owned by the server role and dies with it however the run ends:
//! it runs in the foreground (`daemon off`) in a process group of its own,
//! and a guardian shell holding a pipe from the role kills that group and
//! removes nginx's directory as soon as the pipe closes — when the role
//! stops normally, fails, or is killed with its parent (PDEATHSIG). The
//! role's own process group is not used for this, because the parent
//! SIGKILLs that group, guardian included, before anyone could clean up.

mod fileset;
mod load;
mod mix;
mod nginx;
mod response;
pub mod server;
mod target;

pub use fileset::{
    auto_cap, cap_note, file_path, file_size, fileset_dirs, spec_dirs, write_fileset, DIR_BYTES,
    MANIFEST,
};
pub use mix::{Kind, Mix, MixKind, Request, Rng, Zipf, KIND_SHARE};
pub use nginx::nginx_conf;
pub use response::{conforms, credit, parse_response, Parsed};
pub use server::{next_ad, parse_request, serve, Mode, Served};

use crate::roles::{self, Combined, Roles, Timing};
use crate::{ChartDef, Family, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind, Params, RunRule};
use std::time::Duration;

const CONFORMING: MetricDef = MetricDef::higher("conforming", "conns");
const OPS: MetricDef = MetricDef::higher("ops", "ops/s");
const KBPS: MetricDef = MetricDef::higher("kbps", "kbit/s");
const MBPS: MetricDef = MetricDef::higher("mbps", "Mbit/s");
const LAT_MEAN: MetricDef = MetricDef::lower("lat_mean", "ms");
const P99: MetricDef = MetricDef::quantile("p99", "ms", "latency", 0.99, 1e-6);
const ERRORS: MetricDef = MetricDef::lower("errors", "errors");
const SERVER_CPU: MetricDef = MetricDef::lower("server_cpu", "%");
const SD_SERVER: MetricDef = MetricDef::lower("sd_server", "µs/op");
/// The load generator's CPU per request: how cheaply kscale makes load,
/// compared with wrk's by scripts/validate-web.
const SD_LOAD: MetricDef = MetricDef::lower("sd_load", "µs/op");

/// The measured window. `--quick` keeps 2 s windows here, not the 0.5 s
/// of other fixed-duration workloads ([`roles::DURATION`]): web is a median
/// of three, not run to convergence, so more windows would not be taken,
/// and hundreds of connections need the longer ramp-up to be open.
const DURATION: ParamDef = ParamDef {
    quick: &["2"],
    ..roles::DURATION
};

const CONNS: ParamDef = ParamDef {
    name: "conns",
    help: "Simultaneous keep-alive connections (SPECweb99's load; the seed's x-axis: 420 to \
           820). Load from `--peer`s is not supported yet: nginx listens on loopback.",
    kind: ParamKind::Int {
        min: 1,
        max: 100_000,
    },
    default: &["100", "200", "400", "600", "800"],
    quick: &["50", "200", "800"],
};
const RATE: ParamDef = ParamDef {
    name: "rate",
    help: "Throttle of each connection in kbit/s (SPECweb99's 400); 0 = unthrottled, for \
           comparison with wrk. A connection conforms at 80 % of it.",
    kind: ParamKind::Int {
        min: 0,
        max: 100_000_000,
    },
    default: &["400"],
    quick: &[],
};
const MIX: ParamDef = ParamDef {
    name: "mix",
    help: "Request mix: `specweb` (70 % static GET, 12.45 % dynamic GET, 12.6 % GET with \
           cookie and ad rotation, 4.8 % POST, 0.15 % CGI), `static` (the static 70 % alone), \
           or `class0`…`class3` (static GETs of one file class, for the wrk comparison).",
    kind: ParamKind::Choice(&["specweb", "static", "class0", "class1", "class2", "class3"]),
    default: &["specweb"],
    quick: &[],
};
const FILESET: ParamDef = ParamDef {
    name: "fileset",
    help: "Cap on the generated file set's bytes; 0 = a quarter of the free memory and of \
           the free disk. SPECweb99 sizes it from `conns` (5 MB per directory, \
           (25 + 3.28·conns)/5 directories); the result says when the cap applied.",
    kind: ParamKind::Size {
        min: 0,
        max: u64::MAX,
    },
    default: &["0"],
    quick: &["64m"],
};
const SEED: ParamDef = ParamDef {
    name: "seed",
    help: "Seed of the file contents and of every connection's request sequence.",
    kind: ParamKind::Int {
        min: 0,
        max: u64::MAX,
    },
    default: &["1"],
    quick: &[],
};

const WAIT: ParamDef = ParamDef {
    name: "wait",
    help: "How the load waits for responses: `sleep` in epoll_wait until one arrives or a \
           request is due, as a client does; `spin`, polling without sleeping, so that no \
           response has to wake it, as a generator saturating its CPU (wrk) never sleeps \
           (docs/families/web.md).",
    kind: ParamKind::Choice(&["sleep", "spin"]),
    default: &["sleep"],
    quick: &[],
};

const SEND: ParamDef = ParamDef {
    name: "send",
    help: "When the load writes a connection's next request: `now`, right after reading its \
           response; `writable`, as wrk does, on the event loop's next turn, once epoll says \
           the socket is writable (EPOLLOUT armed when the response is read and removed \
           after the write), so that the requests of one turn's responses leave together \
           (docs/families/web.md).",
    kind: ParamKind::Choice(&["now", "writable"]),
    default: &["now"],
    quick: &[],
};

const MODE: ParamDef = ParamDef {
    name: "mode",
    help: "Design of kscale's own server: `thread-pool` (16 threads per CPU of the \
           configuration share one one-shot epoll set and serve a connection at a time with \
           blocking I/O) or `epoll` (one non-blocking event loop per CPU).",
    kind: ParamKind::Choice(&["thread-pool", "epoll"]),
    default: &["thread-pool", "epoll"],
    quick: &["thread-pool", "epoll"],
};

const TARGET: ParamDef = ParamDef {
    name: "target",
    help: "The web server to drive, `http://HOST[:PORT]/[PATH]`: it serves a file set written \
           by `kscale web fileset` at PATH. `kscale run web --target URL` sets it.",
    kind: ParamKind::Url,
    default: &["http://127.0.0.1:8080/"],
    quick: &[],
};
const DYNAMIC: ParamDef = ParamDef {
    name: "dynamic",
    help: "Path prefix of the target's dynamic handlers (PREFIX/dyn, PREFIX/ad, PREFIX/post, \
           PREFIX/cgi, as kscale's nginx configuration and own server define them; `/` for \
           the root), or `none`: the mix is static-only and the result says so.",
    kind: ParamKind::Str,
    default: &["none"],
    quick: &[],
};

const METRICS: &[MetricDef] = &[
    CONFORMING, OPS, KBPS, MBPS, LAT_MEAN, P99, ERRORS, SERVER_CPU, SD_SERVER, SD_LOAD,
];
/// The seed's figures 7–10 (bit rate per connection, latency, ops/s, server
/// CPU) against connections, with conforming connections and p99 besides.
const CHARTS: &[ChartDef] = &[ChartDef::against("conns").metrics(&[
    "conforming",
    "kbps",
    "lat_mean",
    "p99",
    "ops",
    "server_cpu",
])];

/// The roles of a web workload: SPECweb99's load against `server`, for the
/// `duration` param's window, its connections split among load processes.
const fn roles_with(server: Option<roles::RoleFn>) -> Roles {
    Roles {
        server,
        load: load::load,
        timing: Timing::Duration,
        spread: Some("conns"),
        combine,
    }
}

static OWN: Roles = roles_with(Some(server::server));
/// No server role: the load drives the `target` param's server.
static EXTERNAL: Roles = roles_with(None);
static WEB: Roles = roles_with(Some(nginx::server));

/// What every web workload shares: SPECweb99's metrics and charts, its rule
/// (three trials, the median) and `run --capacity` over connections.
const SPECWEB: WorkloadDef = WorkloadDef {
    metrics: METRICS,
    charts: CHARTS,
    timeout: Duration::from_secs(300),
    rule: RunRule::MedianOf(3),
    capacity: Some("conns"),
    ..WorkloadDef::family("web")
};

pub static FAMILY: Family = Family {
    name: "web",
    title: "Web serving (SPECweb99-style)",
    help: "SPECweb99's method: a web server confined to the CPU configuration (kscale's own, \
           in two designs, or Debian's nginx) serves a generated SPECweb99 file set to \
           throttled keep-alive connections from kscale's load generator (seeds 000 and 004).",
    workloads: &[
        WorkloadDef {
            name: "own",
            title: "SPECweb99-style load on kscale's server",
            help: "Conforming connections (at least 320 of 400 kbit/s, under 1 % errors) of \
                   `conns` keep-alive HTTP/1.1 connections issuing SPECweb99's request mix to \
                   kscale's own server on the measured CPUs, in the design `mode` names: static \
                   files with sendfile, dynamic GETs, ad rotation and POSTs in-process, CGI as a \
                   fork and exec. The same metrics as web.nginx; three trials, the median.",
            params: &[CONNS, MODE, RATE, MIX, FILESET, SEED, DURATION, WAIT, SEND],
            roles: Some(&OWN),
            ..SPECWEB
        },
        WorkloadDef {
            name: "nginx",
            title: "SPECweb99-style load on nginx",
            help: "Conforming connections (at least 320 of 400 kbit/s, under 1 % errors) of \
               `conns` keep-alive HTTP/1.1 connections issuing SPECweb99's request mix to \
               Debian's nginx (package nginx-light) on the measured CPUs, with ops/s, Mbit/s, \
               bit rate per connection, mean and p99 latency from histograms, errors, the \
               server's CPU utilisation and CPU µs per operation of server and load. Three \
               trials, the \
               median, as SPECweb99 ruled.",
            params: &[CONNS, RATE, MIX, FILESET, SEED, DURATION, WAIT, SEND],
            roles: Some(&WEB),
            unavailable: nginx::unavailable,
            ..SPECWEB
        },
        WorkloadDef {
            name: "target",
            title: "SPECweb99-style load on an external server",
            help: "The same load and mix against the web server at `target` (any server \
                   serving a file set from `kscale web fileset`; `kscale run web --target \
                   URL`). Families and suites leave it out unless it is named or given \
                   --target. No server CPU is measured.",
            params: &[
                TARGET, DYNAMIC, CONNS, RATE, MIX, SEED, DURATION, WAIT, SEND,
            ],
            roles: Some(&EXTERNAL),
            ..SPECWEB
        },
    ],
};

/// Lifts the soft limit of open files to the hard limit: thousands of
/// connections need thousands of descriptors on both ends.
fn raise_nofile(need: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit RLIMIT_NOFILE")?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).context("setrlimit RLIMIT_NOFILE")?;
    }
    if hard < need {
        bail!("RLIMIT_NOFILE is {hard}, {need} open files are needed: raise it (ulimit -n)");
    }
    Ok(())
}

/// Test-only: `KSCALE_TEST_WEB_SPREAD=F` (0 < F < 1) makes the third,
/// fifth, … window a run measures at each connection count conform F
/// times as many connections (rounded down), as a busier phase of a
/// neighbour would: a step's window (and a first step's warm-up) reads
/// as measured, so the search finds its answer as without the knob, and
/// that answer's rule's windows then spread too far for a 10 % interval
/// (a capacity test's answer that needs windows of its own to settle).
/// Counted in the process that combines the trials, the run's.
fn test_web_spread(params: &Params) -> Option<f64> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static SEEN: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let f: f64 = std::env::var("KSCALE_TEST_WEB_SPREAD").ok()?.parse().ok()?;
    if !(f > 0.0 && f < 1.0) {
        return None;
    }
    let conns = params.get("conns").ok()?.to_string();
    let mut seen = SEEN.lock().ok()?;
    let n = seen.entry(conns).or_insert(0);
    *n += 1;
    (*n >= 3 && *n % 2 == 1).then_some(f)
}

fn combine(params: &Params, c: &Combined) -> Result<TrialOutput> {
    let ops = c.load_sum("ops");
    if ops <= 0.0 {
        bail!("no request completed in the measured window");
    }
    let conns = c.load_sum("conns").max(1.0);
    let mbps = c.load_rate("bytes") * 8.0 / 1e6;
    let conforming = match test_web_spread(params) {
        Some(f) => (c.load_sum("conforming") * f).floor(),
        None => c.load_sum("conforming"),
    };
    let mut out = TrialOutput::new(ops as u64)
        .with(&CONFORMING, conforming)
        .with(&OPS, c.load_rate("ops"))
        .with(&MBPS, mbps)
        .with(&KBPS, mbps * 1000.0 / conns)
        .with(&LAT_MEAN, c.load_sum("lat_ns") / ops / 1e6)
        .with(&ERRORS, c.load_sum("errors"))
        .with(&SD_LOAD, c.load_cpu_s() / ops * 1e6);
    if let Some(s) = &c.server {
        let cpu = s.cpu.cpu_s + s.counts.get("nginx_cpu_s").copied().unwrap_or(0.0);
        let cap = s.cpu.window_s * s.cpu.cpus.max(1) as f64;
        if cap > 0.0 {
            out = out.with(&SERVER_CPU, cpu / cap * 100.0);
        }
        out = out.with(&SD_SERVER, cpu / ops * 1e6);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's figures 7–10 — bit rate per connection, latency, ops/s
    /// and server CPU against connections — are declared for every web
    /// workload, so the report draws them for each (one line per system ×
    /// CPU configuration, and per mode for the own server).
    #[test]
    fn every_workload_charts_figures_7_to_10_against_conns() {
        for w in FAMILY.workloads {
            let c = w
                .charts
                .iter()
                .find(|c| c.x == "conns")
                .unwrap_or_else(|| panic!("{} has no chart against conns", w.id()));
            for m in ["kbps", "lat_mean", "ops", "server_cpu"] {
                assert!(c.metrics.contains(&m), "{} does not chart {m}", w.id());
            }
            assert_eq!(w.rule, RunRule::MedianOf(3), "{}", w.id());
            assert_eq!(w.capacity, Some("conns"), "{}", w.id());
        }
        let ids: Vec<String> = FAMILY.workloads.iter().map(|w| w.id()).collect();
        assert_eq!(ids, ["web.own", "web.nginx", "web.target"]);
    }
}
