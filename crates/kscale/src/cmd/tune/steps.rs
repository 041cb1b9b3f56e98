//! The tuning plan (docs/tune.md): a TOML file naming a target (workloads,
//! params, CPUs, an optional scratch filesystem, an optional private network
//! namespace) and ordered steps, each a name, a rationale and the settings
//! it adds to the steps before it.
//!
//! Everything a plan says is checked before anything is changed: unknown
//! keys, unknown workloads, bad values and duplicate steps are refused with
//! the file, line and column they are at.

use crate::error::user;
use anyhow::Result;
use kscale_core::params::parse_size;
use kscale_sys::settings;
use kscale_workloads::WorkloadDef;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    target: RawTarget,
    #[serde(default)]
    step: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    workloads: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    params: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    cpus: Option<Spanned<String>>,
    #[serde(default)]
    netns: bool,
    fs: Option<RawFs>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFs {
    size: Spanned<String>,
    #[serde(default)]
    options: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Spanned<String>,
    rationale: Spanned<String>,
    settings: Spanned<Vec<RawSetting>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSetting {
    kind: Spanned<String>,
    key: Option<Spanned<String>>,
    value: Spanned<toml::Value>,
}

/// The kinds a setting may have, as a plan names them.
pub const KINDS: &[&str] = &[
    "sysctl",
    "thp",
    "sched",
    "irq_affinity",
    "affinity",
    "param",
    "mount",
    "nic",
];

/// A validated plan.
#[derive(Clone)]
pub struct Plan {
    pub workloads: Vec<&'static WorkloadDef>,
    /// The target's params, as `--param` overrides.
    pub params: Vec<(String, Vec<String>)>,
    pub cpus: String,
    /// Measure in a private network namespace kscale makes (and that
    /// vanishes with it): namespaced net.* sysctls and loopback's MTU
    /// change only there.
    pub netns: bool,
    pub fs: Option<FsSpec>,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FsSpec {
    pub size: u64,
    pub options: String,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    pub rationale: String,
    pub settings: Vec<Setting>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    /// A file under /proc or /sys: `kind` is its journal kind, `key` the
    /// plan's name for it (resolved to a path when applied, since some
    /// depend on the running kernel).
    File {
        kind: &'static str,
        key: String,
        value: String,
    },
    /// IRQs by number or /proc/interrupts pattern, to a CPU list.
    Irq { spec: String, cpus: String },
    /// The workload's CPU placement (a `--cpus` value).
    Affinity(String),
    /// A workload param: nothing on the machine changes.
    Param(String, String),
    /// Options of the target's scratch filesystem.
    Mount(String),
    /// A NIC offload (gro, gso, tso) kscale cannot set without ethtool's
    /// ioctl: the step reports it skipped with that reason.
    NicOffload {
        dev: String,
        what: String,
        value: String,
    },
}

impl Plan {
    /// The groups of states measured together (docs/tune.md, "Interleaved
    /// steps"), as (first, last) state numbers, 0 the baseline: a group
    /// starts at the baseline or at a step that switches slowly, and takes
    /// every fast step after it.
    pub fn groups(&self, hotplug: bool) -> Vec<(usize, usize)> {
        let n = self.steps.len();
        let mut out = Vec::new();
        let mut first = 0;
        while first <= n {
            let last = (first + 1..=n)
                .take_while(|&i| self.steps[i - 1].slow_switch(hotplug).is_none())
                .last()
                .unwrap_or(first);
            out.push((first, last));
            first = last + 1;
        }
        out
    }
}

impl Step {
    /// Why this step cannot be switched on and off between one trial and
    /// the next, naming its first slow setting; `None` when every setting
    /// switches in well under a trial (docs/tune.md, "Interleaved steps").
    pub fn slow_switch(&self, hotplug: bool) -> Option<String> {
        self.settings.iter().find_map(|s| {
            s.slow_switch(hotplug)
                .map(|why| format!("{}: {why}", s.describe()))
        })
    }
}

impl Setting {
    /// Why switching this setting back and forth between trials is too
    /// slow or too disruptive, or `None` when it is a file write (a sysctl,
    /// THP, a scheduler knob, an IRQ's CPU list) or no change of the
    /// machine at all (a param, the workload's CPUs, a skipped offload).
    pub fn slow_switch(&self, hotplug: bool) -> Option<&'static str> {
        match self {
            Setting::Mount(_) => Some(
                "a mount option takes a remount (ext4's data= an unmount and a mount), \
                 which also leaves the page cache and the journal cold",
            ),
            Setting::File { kind: "nic", .. } => Some(
                "an MTU change may reset the interface: many drivers reallocate their rings \
                 and renegotiate the link",
            ),
            Setting::Affinity(_) if hotplug => {
                Some("under --cpu-mode hotplug another CPU set takes CPUs offline and online")
            }
            _ => None,
        }
    }

    /// One line for the output and the chart's legend.
    pub fn describe(&self) -> String {
        match self {
            Setting::File {
                kind: "nic",
                key,
                value,
            } => format!("nic {key}.mtu={value}"),
            Setting::File { kind, key, value } => format!("{kind} {key}={value}"),
            Setting::Irq { spec, cpus } => format!("irq {spec} → CPUs {cpus}"),
            Setting::Affinity(c) => format!("cpus {c}"),
            Setting::Param(k, v) => format!("param {k}={v}"),
            Setting::Mount(o) => format!("mount -o {o}"),
            Setting::NicOffload { dev, what, value } => format!("nic {dev}.{what}={value}"),
        }
    }
}

/// Line and column (both from 1) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, msg: impl std::fmt::Display) -> anyhow::Error {
        let (l, c) = line_col(self.text, span.start);
        user(format!("{}:{l}:{c}: {msg}", self.file))
    }
}

/// Reads and validates a plan file.
pub fn load(path: &Path) -> Result<(Plan, String)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| user(format!("cannot read plan {}: {e}", path.display())))?;
    let plan = parse(&path.display().to_string(), &text)?;
    Ok((plan, text))
}

/// A scalar as the kernel or a param would be given it.
fn scalar(cx: &Ctx<'_>, v: &Spanned<toml::Value>) -> Result<String> {
    match v.get_ref() {
        toml::Value::String(s) => Ok(s.trim().to_string()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.into()),
        other => Err(cx.err(
            v.span(),
            format!("bad value {other}: expected a string, an integer or a boolean"),
        )),
    }
}

pub fn parse(file: &str, text: &str) -> Result<Plan> {
    let cx = Ctx { file, text };
    let raw: RawPlan = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(s) => cx.err(s, msg),
            None => user(format!("{file}: {msg}")),
        }
    })?;
    let t = &raw.target;
    let workloads = target_workloads(&cx, t)?;
    let mut params: Vec<(String, Vec<String>)> = Vec::new();
    for (k, v) in &t.params {
        let values: Vec<String> = match v.get_ref() {
            toml::Value::Array(a) => a
                .iter()
                .map(|x| scalar(&cx, &Spanned::new(v.span(), x.clone())))
                .collect::<Result<_>>()?,
            _ => vec![scalar(&cx, v)?],
        };
        check_param(&cx, &workloads, k, &values, v.span())?;
        params.push((k.get_ref().clone(), values));
    }
    let cpus = match &t.cpus {
        Some(c) => {
            check_cpus(&cx, c.get_ref(), c.span())?;
            c.get_ref().trim().to_string()
        }
        None => "all".into(),
    };
    let fs = t.fs.as_ref().map(|f| fs_spec(&cx, f)).transpose()?;
    let mut steps: Vec<Step> = Vec::new();
    for s in &raw.step {
        let step = step(&cx, s, &workloads, fs.is_some(), &steps)?;
        steps.push(step);
    }
    if steps.is_empty() {
        return Err(user(format!(
            "{file}: no steps: add at least one [[step]] with a name, a rationale and settings"
        )));
    }
    Ok(Plan {
        workloads,
        params,
        cpus,
        netns: t.netns,
        fs,
        steps,
    })
}

/// The target's workloads, families expanded, each once however often it
/// is named.
fn target_workloads(cx: &Ctx<'_>, t: &RawTarget) -> Result<Vec<&'static WorkloadDef>> {
    let mut workloads: Vec<&'static WorkloadDef> = Vec::new();
    if t.workloads.get_ref().is_empty() {
        return Err(cx.err(
            t.workloads.span(),
            "no workloads: name at least one, e.g. [\"net.tcp_rr\"] (see `kscale list`)",
        ));
    }
    for w in t.workloads.get_ref() {
        let name = w.get_ref();
        let found = crate::engine::plan::resolve_targets(std::slice::from_ref(name), None, false)
            .map_err(|e| cx.err(w.span(), e))?;
        for f in found {
            if !workloads.iter().any(|o| std::ptr::eq(*o, f)) {
                workloads.push(f);
            }
        }
    }
    Ok(workloads)
}

/// `[target.fs]`: a size a loop device can be made of, and mount options
/// kscale may pass on.
fn fs_spec(cx: &Ctx<'_>, f: &RawFs) -> Result<FsSpec> {
    let size = parse_size(f.size.get_ref())
        .filter(|s| (16 << 20..=1 << 40).contains(s))
        .ok_or_else(|| {
            cx.err(
                f.size.span(),
                format!(
                    "bad fs size `{}`: expected a size from 16m to 1t, e.g. 512m",
                    f.size.get_ref()
                ),
            )
        })?;
    let options = match &f.options {
        Some(o) => {
            check_mount_options(cx, o)?;
            o.get_ref().trim().to_string()
        }
        None => String::new(),
    };
    Ok(FsSpec { size, options })
}

/// One `[[step]]`: a name that can be part of a run label and is not
/// taken by the steps `before` it, a rationale, and its settings.
fn step(
    cx: &Ctx<'_>,
    s: &RawStep,
    workloads: &[&'static WorkloadDef],
    has_fs: bool,
    before: &[Step],
) -> Result<Step> {
    let name = s.name.get_ref().trim();
    let ok_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    if !ok_name {
        return Err(cx.err(
            s.name.span(),
            format!(
                "bad step name `{name}`: use letters, digits, `-` and `_` (it becomes part of a run label)"
            ),
        ));
    }
    if name == "baseline" || before.iter().any(|o| o.name == name) {
        return Err(cx.err(
            s.name.span(),
            format!(
                "duplicate step `{name}`: every step needs its own name (and `baseline` is taken)"
            ),
        ));
    }
    if s.rationale.get_ref().trim().is_empty() {
        return Err(cx.err(
            s.rationale.span(),
            "empty rationale: say in one line why this step should help",
        ));
    }
    if s.settings.get_ref().is_empty() {
        return Err(cx.err(s.settings.span(), "a step needs at least one setting"));
    }
    let mut out = Vec::new();
    for raw in s.settings.get_ref() {
        out.push(setting(cx, raw, workloads, has_fs)?);
    }
    Ok(Step {
        name: name.to_string(),
        rationale: s.rationale.get_ref().trim().to_string(),
        settings: out,
    })
}

fn check_param(
    cx: &Ctx<'_>,
    workloads: &[&'static WorkloadDef],
    name: &Spanned<String>,
    values: &[String],
    vspan: Range<usize>,
) -> Result<()> {
    let having: Vec<&&WorkloadDef> = workloads
        .iter()
        .filter(|w| w.param(name.get_ref()).is_some())
        .collect();
    if having.is_empty() {
        let known: std::collections::BTreeSet<&str> = workloads
            .iter()
            .flat_map(|w| w.params.iter().map(|p| p.name))
            .collect();
        return Err(cx.err(
            name.span(),
            format!(
                "unknown param `{}` (the target's workloads have: {})",
                name.get_ref(),
                known.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    if values.is_empty() {
        return Err(cx.err(vspan, "a param needs at least one value"));
    }
    for w in having {
        for v in values {
            if let Some(p) = w.param(name.get_ref()) {
                p.validate(&w.id(), v)
                    .map_err(|e| cx.err(vspan.clone(), e))?;
            }
        }
    }
    Ok(())
}

fn check_cpus(cx: &Ctx<'_>, spec: &str, span: Range<usize>) -> Result<()> {
    let topo = crate::cmd::cpus::usable()?;
    let configs =
        kscale_core::cpus::resolve(&[spec.to_string()], &topo, kscale_core::CpuOrder::Compact)
            .map_err(|e| cx.err(span.clone(), e))?;
    if configs.len() != 1 {
        return Err(cx.err(
            span,
            format!("bad cpus `{spec}`: a tuning study measures one CPU configuration, e.g. `all`, `1` or `0-1`"),
        ));
    }
    Ok(())
}

fn check_mount_options(cx: &Ctx<'_>, o: &Spanned<String>) -> Result<()> {
    let s = o.get_ref().trim();
    let ok = !s.is_empty()
        && s.split(',').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_=-".contains(c))
        })
        && !s.split(',').any(|p| p == "loop" || p.starts_with("loop="));
    if !ok {
        return Err(cx.err(
            o.span(),
            format!("bad mount options `{s}`: expected a comma list like data=writeback,noatime"),
        ));
    }
    Ok(())
}

fn setting(
    cx: &Ctx<'_>,
    raw: &RawSetting,
    workloads: &[&'static WorkloadDef],
    has_fs: bool,
) -> Result<Setting> {
    let kind = raw.kind.get_ref().as_str();
    let value = scalar(cx, &raw.value)?;
    if value.is_empty() || value.contains('\n') {
        return Err(cx.err(raw.value.span(), "empty or multi-line value"));
    }
    let s = RawOne { cx, raw, kind };
    match kind {
        "sysctl" | "thp" | "sched" => s.file(value),
        "irq_affinity" => s.irq(value),
        "affinity" => {
            s.no_key()?;
            check_cpus(cx, &value, raw.value.span())?;
            Ok(Setting::Affinity(value))
        }
        "param" => {
            let k = s.key("a param of the target's workloads")?;
            check_param(
                cx,
                workloads,
                k,
                std::slice::from_ref(&value),
                raw.value.span(),
            )?;
            Ok(Setting::Param(k.get_ref().clone(), value))
        }
        "mount" => {
            s.no_key()?;
            if !has_fs {
                return Err(cx.err(
                    raw.kind.span(),
                    "a `mount` setting needs a scratch filesystem: add [target.fs] with a size",
                ));
            }
            check_mount_options(cx, &Spanned::new(raw.value.span(), value.clone()))?;
            Ok(Setting::Mount(value))
        }
        "nic" => s.nic(value),
        other => Err(cx.err(
            raw.kind.span(),
            format!(
                "unknown setting kind `{other}` (accepted: {})",
                KINDS.join(", ")
            ),
        )),
    }
}

/// One setting as the plan wrote it, with what its errors point at: the
/// kind when a key is missing, the key or the value when it is wrong.
struct RawOne<'a> {
    cx: &'a Ctx<'a>,
    raw: &'a RawSetting,
    kind: &'a str,
}

impl<'a> RawOne<'a> {
    /// The key this kind needs; `what` says what one looks like.
    fn key(&self, what: &str) -> Result<&'a Spanned<String>> {
        self.raw.key.as_ref().ok_or_else(|| {
            self.cx.err(
                self.raw.kind.span(),
                format!("a `{}` setting needs key = {what}", self.kind),
            )
        })
    }

    /// Refuses a key on a kind that has none, rather than ignore it.
    fn no_key(&self) -> Result<()> {
        match &self.raw.key {
            Some(k) => Err(self.cx.err(
                k.span(),
                format!("a `{}` setting has no key, only a value", self.kind),
            )),
            None => Ok(()),
        }
    }

    /// An error at the key, where a wrong name is.
    fn key_err(&self, k: &Spanned<String>, msg: String) -> anyhow::Error {
        self.cx.err(k.span(), msg)
    }

    /// An error at the value, where a wrong value is.
    fn value_err(&self, msg: String) -> anyhow::Error {
        self.cx.err(self.raw.value.span(), msg)
    }

    /// A sysctl, THP or scheduler setting: a file under /proc/sys or /sys
    /// the key names, written the value.
    fn file(&self, value: String) -> Result<Setting> {
        type PathOf = fn(&str) -> std::result::Result<std::path::PathBuf, String>;
        let (kind, hint, path): (&'static str, &str, PathOf) = match self.kind {
            "sysctl" => (
                "sysctl",
                "a sysctl name like \"net.core.rmem_max\"",
                settings::sysctl_path,
            ),
            "thp" => ("thp", "\"enabled\" or \"defrag\"", settings::thp_path),
            _ => (
                "sched",
                "a knob like \"sched_rr_timeslice_ms\" or \"base_slice_ns\"",
                settings::sched_path,
            ),
        };
        let k = self.key(hint)?;
        path(k.get_ref()).map_err(|e| self.key_err(k, e))?;
        if kind == "thp" {
            let allowed: &[&str] = if k.get_ref() == "enabled" {
                &["always", "madvise", "never"]
            } else {
                &["always", "defer", "defer+madvise", "madvise", "never"]
            };
            if !allowed.contains(&value.as_str()) {
                return Err(self.value_err(format!(
                    "bad thp {} value `{value}` (accepted: {})",
                    k.get_ref(),
                    allowed.join(", ")
                )));
            }
        }
        Ok(Setting::File {
            kind,
            key: k.get_ref().clone(),
            value,
        })
    }

    /// `irq_affinity`: IRQs the key names, to the value's CPU list.
    fn irq(&self, value: String) -> Result<Setting> {
        let k = self.key("an IRQ number or a /proc/interrupts name like \"virtio0\"")?;
        if k.get_ref().trim().is_empty() {
            return Err(self.key_err(k, "empty IRQ name".into()));
        }
        if kscale_core::cpus::parse_cpulist(&value).is_none() {
            return Err(self.value_err(format!("bad CPU list `{value}`: expected e.g. 0 or 0-1")));
        }
        Ok(Setting::Irq {
            spec: k.get_ref().trim().to_string(),
            cpus: value,
        })
    }

    /// `nic`: a device's MTU, which is a file, or an offload, which kscale
    /// names but cannot set.
    fn nic(&self, value: String) -> Result<Setting> {
        let k = self.key("DEV.ATTR, e.g. \"lo.mtu\" or \"veth0.gro\"")?;
        let (dev, what) = k.get_ref().rsplit_once('.').ok_or_else(|| {
            self.key_err(
                k,
                format!(
                    "bad nic key `{}`: expected DEV.ATTR, e.g. lo.mtu",
                    k.get_ref()
                ),
            )
        })?;
        settings::check_dev(dev).map_err(|e| self.key_err(k, e))?;
        match what {
            "mtu" => {
                let ok = value
                    .parse::<u32>()
                    .is_ok_and(|m| (68..=65536).contains(&m));
                if !ok {
                    return Err(self.value_err(format!("bad MTU `{value}`: expected 68 to 65536")));
                }
                Ok(Setting::File {
                    kind: "nic",
                    key: dev.to_string(),
                    value,
                })
            }
            "gro" | "gso" | "tso" => {
                if !["on", "off"].contains(&value.as_str()) {
                    return Err(self.value_err(format!(
                        "bad {what} value `{value}`: expected on or off (or true/false)"
                    )));
                }
                Ok(Setting::NicOffload {
                    dev: dev.to_string(),
                    what: what.to_string(),
                    value,
                })
            }
            other => Err(self.key_err(
                k,
                format!("unknown NIC setting `{other}` (accepted: mtu, gro, gso, tso)"),
            )),
        }
    }
}

/// Mount options after a step: each new option replaces the one with the
/// same name (`data=…`, or any atime choice), the rest are kept in order.
pub fn merge_mount_options(current: &str, new: &str) -> String {
    fn group(o: &str) -> &str {
        let name = o.split('=').next().unwrap_or(o);
        match name {
            "atime" | "noatime" | "relatime" | "strictatime" | "norelatime" => "atime",
            n => n.strip_prefix("no").unwrap_or(n),
        }
    }
    let mut out: Vec<String> = current
        .split(',')
        .filter(|o| !o.is_empty())
        .map(String::from)
        .collect();
    for n in new.split(',').filter(|o| !o.is_empty()) {
        out.retain(|o| group(o) != group(n));
        out.push(n.to_string());
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[target]
workloads = ["syscall.null"]
cpus = "1"

[[step]]
name = "fin"
rationale = "shorter FIN timeout"
settings = [{ kind = "sysctl", key = "net.ipv4.tcp_fin_timeout", value = 30 }]

[[step]]
name = "pin"
rationale = "pin it"
settings = [{ kind = "affinity", value = "all" }]
"#;

    fn err(text: &str) -> String {
        match parse("p.toml", text) {
            Ok(_) => panic!("accepted a bad plan"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_good_plan_parses() {
        let Ok(p) = parse("p.toml", GOOD) else {
            panic!("refused the good plan")
        };
        assert_eq!(p.steps.len(), 2);
        assert_eq!(
            p.steps[0].settings[0],
            Setting::File {
                kind: "sysctl",
                key: "net.ipv4.tcp_fin_timeout".into(),
                value: "30".into()
            }
        );
        assert_eq!(p.cpus, "1");
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = err(&GOOD.replace("cpus = \"1\"", "cpus = \"1\"\nbogus = 1"));
        assert!(e.starts_with("p.toml:5:1: "), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let e = err(&GOOD.replace("syscall.null", "nope.nope"));
        assert!(e.starts_with("p.toml:3:14: "), "{e}");
        assert!(e.contains("nope.nope"), "{e}");
        let e = err(&GOOD.replace("name = \"pin\"", "name = \"fin\""));
        assert!(e.starts_with("p.toml:12:8: duplicate step `fin`"), "{e}");
        let e = err(&GOOD.replace("kind = \"affinity\"", "kind = \"magic\""));
        assert!(e.contains("unknown setting kind `magic`"), "{e}");
        assert!(e.starts_with("p.toml:14:"), "{e}");
        let e = err(&GOOD.replace("net.ipv4.tcp_fin_timeout", "../../etc/passwd"));
        assert!(e.contains("bad sysctl key"), "{e}");
        let e = err(&GOOD.replace("value = \"all\"", "value = \"0-99\""));
        assert!(e.starts_with("p.toml:14:"), "{e}");
    }

    #[test]
    fn params_and_mounts_are_checked() {
        let e = err(&GOOD.replace("cpus = \"1\"", "cpus = \"1\"\nparams = { size = \"1k\" }"));
        assert!(e.contains("unknown param `size`"), "{e}");
        let e = err(&GOOD.replace(
            "kind = \"affinity\", value = \"all\"",
            "kind = \"mount\", value = \"noatime\"",
        ));
        assert!(e.contains("[target.fs]"), "{e}");
        let with_fs = GOOD.replace(
            "cpus = \"1\"",
            "cpus = \"1\"\nfs = { size = \"64m\", options = \"data=ordered\" }",
        );
        let Ok(p) = parse("p.toml", &with_fs) else {
            panic!("refused a plan with a filesystem")
        };
        assert_eq!(
            p.fs,
            Some(FsSpec {
                size: 64 << 20,
                options: "data=ordered".into()
            })
        );
        let e = err(&with_fs.replace("64m", "1k"));
        assert!(e.contains("bad fs size"), "{e}");
        let e = err(&with_fs.replace("data=ordered", "loop,ro"));
        assert!(e.contains("bad mount options"), "{e}");
    }

    #[test]
    fn mount_options_merge_by_name() {
        assert_eq!(
            merge_mount_options("data=ordered", "data=writeback"),
            "data=writeback"
        );
        assert_eq!(
            merge_mount_options("data=writeback,relatime", "noatime"),
            "data=writeback,noatime"
        );
        assert_eq!(merge_mount_options("", "noatime"), "noatime");
        assert_eq!(merge_mount_options("barrier", "nobarrier"), "nobarrier");
    }

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn only_mounts_mtus_and_hotplugged_cpus_switch_slowly() {
        let step = |settings: Vec<Setting>| Step {
            name: "s".into(),
            rationale: "r".into(),
            settings,
        };
        let file = |kind: &'static str| Setting::File {
            kind,
            key: "k".into(),
            value: "1".into(),
        };
        let fast = step(vec![
            file("sysctl"),
            file("thp"),
            file("sched"),
            Setting::Irq {
                spec: "eth0".into(),
                cpus: "0".into(),
            },
            Setting::Param("conns".into(), "4".into()),
            Setting::Affinity("1".into()),
        ]);
        assert_eq!(fast.slow_switch(false), None);
        let why = fast.slow_switch(true).unwrap_or_default();
        assert!(why.starts_with("cpus 1: under --cpu-mode hotplug"), "{why}");
        let mixed = step(vec![file("sysctl"), Setting::Mount("noatime".into())]);
        let why = mixed.slow_switch(false).unwrap_or_default();
        assert!(
            why.starts_with("mount -o noatime: a mount option takes a remount"),
            "{why}"
        );
        assert!(step(vec![file("nic")]).slow_switch(false).is_some());
        let mut plan = parse("p.toml", GOOD).expect("plan");
        assert_eq!(plan.groups(false), vec![(0, 2)]);
        // The pinning step under hotplug starts a group of its own.
        assert_eq!(plan.groups(true), vec![(0, 1), (2, 2)]);
        plan.steps.insert(0, mixed);
        assert_eq!(plan.groups(false), vec![(0, 0), (1, 3)]);
    }
}
