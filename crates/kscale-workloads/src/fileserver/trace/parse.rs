//! The loadfile parser: a dbench loadfile read as dbench's child.c reads
//! one, into the calls a client replays.

use super::{ACCEPTED, DEFAULT_TRACE, FILE_OVERWRITE_IF, KINDS, MAX_IO};
use anyhow::{bail, Result};
use std::collections::HashMap;
use std::io;
use std::path::Path;

/// An index into [`Trace::paths`]: the trace names few distinct paths many
/// times, and a client turns each into its own path once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PathId(pub(super) u32);

/// A path of the trace, rewritten from `\clients\client1\…`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum TracePath {
    /// Inside the client's own tree (`clients/clientN`): relative to it,
    /// `""` for the tree itself.
    Tree(String),
    /// `\clients`, the directory every client's tree is in.
    Clients,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Call {
    NtCreateX {
        path: PathId,
        options: u32,
        disposition: u32,
        handle: u32,
    },
    Close {
        handle: u32,
    },
    Rename {
        from: PathId,
        to: PathId,
    },
    Unlink {
        path: PathId,
    },
    Deltree {
        path: PathId,
    },
    Rmdir {
        path: PathId,
    },
    Mkdir {
        path: PathId,
    },
    QueryPath {
        path: PathId,
    },
    QueryFile {
        handle: u32,
    },
    QueryFs,
    SetFileInfo {
        handle: u32,
    },
    FindFirst {
        pattern: PathId,
        max: u32,
    },
    WriteX {
        handle: u32,
        offset: u64,
        size: u32,
        ret: u32,
    },
    ReadX {
        handle: u32,
        offset: u64,
        size: u32,
        ret: u32,
    },
    LockX {
        handle: u32,
        offset: u64,
        size: u64,
    },
    UnlockX {
        handle: u32,
        offset: u64,
        size: u64,
    },
    Flush {
        handle: u32,
    },
    /// dbench's `SLEEP usec`: not a call, a pause of the client.
    Sleep {
        us: u64,
    },
}

impl Call {
    /// Its index in [`KINDS`]; `None` for a pause.
    pub(super) fn kind(&self) -> Option<usize> {
        Some(match self {
            Call::NtCreateX { .. } => 0,
            Call::Close { .. } => 1,
            Call::Rename { .. } => 2,
            Call::Unlink { .. } => 3,
            Call::Deltree { .. } => 4,
            Call::Rmdir { .. } => 5,
            Call::Mkdir { .. } => 6,
            Call::QueryPath { .. } => 7,
            Call::QueryFile { .. } => 8,
            Call::QueryFs => 9,
            Call::SetFileInfo { .. } => 10,
            Call::FindFirst { .. } => 11,
            Call::WriteX { .. } => 12,
            Call::ReadX { .. } => 13,
            Call::LockX { .. } => 14,
            Call::UnlockX { .. } => 15,
            Call::Flush { .. } => 16,
            Call::Sleep { .. } => return None,
        })
    }
}

/// One line of the loadfile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Line {
    /// Its number in the file, for messages.
    pub(super) no: u32,
    /// Seconds into the pass at which the call is due (a timed loadfile's
    /// first field); dbench waits for it.
    pub(super) at: Option<f64>,
    pub(super) call: Call,
    /// The recorded status is success (`NT_STATUS_OK`, or `0x0`).
    pub(super) ok: bool,
}

/// A parsed loadfile.
#[derive(Debug)]
pub(super) struct Trace {
    pub(super) lines: Vec<Line>,
    pub(super) paths: Vec<TracePath>,
}

impl Trace {
    /// Reads and parses the loadfile `path` names; any fault is one line
    /// naming `trace=PATH` and what is accepted.
    pub(super) fn load(path: &str) -> Result<Trace> {
        if !Path::new(path).is_absolute() {
            bail!("trace={path}: not an absolute path ({ACCEPTED})");
        }
        let bytes = std::fs::read(path).map_err(|e| {
            let hint = if path == DEFAULT_TRACE && e.kind() == io::ErrorKind::NotFound {
                "; install Debian's dbench package or give trace=PATH"
            } else {
                ""
            };
            anyhow::anyhow!("trace={path}: cannot read it: {e} ({ACCEPTED}){hint}")
        })?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            bail!("trace={path}: gzip-compressed; give it uncompressed ({ACCEPTED})");
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("trace={path}: not a text file ({ACCEPTED})"))?;
        Trace::parse(&text).map_err(|e| anyhow::anyhow!("trace={path}: {e} ({ACCEPTED})"))
    }

    /// Parses a loadfile as dbench's child.c reads one: `\` becomes `/`,
    /// quotes group a field, an optional leading number is the time the
    /// call is due, the last field is the recorded status, `#` starts a
    /// comment and lines of fewer than two fields are skipped.
    pub(super) fn parse(text: &str) -> Result<Trace> {
        let mut t = Trace {
            lines: Vec::new(),
            paths: Vec::new(),
        };
        let mut ids: HashMap<TracePath, PathId> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let no = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let line = parse_line(raw, &mut |p| {
                let next = PathId(ids.len() as u32);
                *ids.entry(p).or_insert(next)
            })
            .map_err(|e| anyhow::anyhow!("line {no}: {e}"))?;
            if let Some((at, call, ok)) = line {
                t.lines.push(Line { no, at, call, ok });
            }
        }
        t.paths = vec![TracePath::Clients; ids.len()];
        for (p, id) in ids {
            t.paths[id.0 as usize] = p;
        }
        if !t.lines.iter().any(|l| l.call.kind().is_some()) {
            bail!("no call to replay");
        }
        Ok(t)
    }

    /// How many calls of kind `name` one pass makes.
    pub(super) fn count(&self, name: &str) -> usize {
        self.lines
            .iter()
            .filter(|l| l.call.kind().map(|k| KINDS[k]) == Some(name))
            .count()
    }

    pub(super) fn calls(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.call.kind().is_some())
            .count()
    }
}

/// Splits a line into fields at spaces and tabs; double quotes group a
/// field with spaces and are dropped, as dbench's `next_token` does.
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            ' ' | '\t' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// A number as dbench reads one (`strtoll(s, NULL, 0)`): decimal, or hex
/// after `0x`.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A trace path rewritten for the client: `\clients\client1\a\b` is
/// `a/b` inside the client's tree; `\clients` the directory of all trees.
fn trace_path(s: &str) -> Result<TracePath, String> {
    let s = s.replace('\\', "/");
    let parts: Vec<&str> = s.trim_start_matches('/').split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Err(format!("path {s} has an empty, `.` or `..` component"));
    }
    match parts.as_slice() {
        ["clients"] => Ok(TracePath::Clients),
        ["clients", "client1", rest @ ..] => Ok(TracePath::Tree(rest.join("/"))),
        _ => Err(format!(
            "path {s} is outside \\clients\\client1 (each client replays the trace in its own \
             tree, clients/clientN)"
        )),
    }
}

/// What the fields before the status must be, by call, for messages.
fn signature(op: &str) -> Option<(&'static str, &'static str)> {
    const SIGS: [(&str, &str); 17] = [
        ("NTCreateX", "PATH CREATE_OPTIONS DISPOSITION HANDLE"),
        ("Close", "HANDLE"),
        ("Rename", "OLD_PATH NEW_PATH"),
        ("Unlink", "PATH ATTRIBUTES"),
        ("Deltree", "PATH"),
        ("Rmdir", "PATH"),
        ("Mkdir", "PATH"),
        ("QUERY_PATH_INFORMATION", "PATH LEVEL"),
        ("QUERY_FILE_INFORMATION", "HANDLE LEVEL"),
        ("QUERY_FS_INFORMATION", "LEVEL"),
        ("SET_FILE_INFORMATION", "HANDLE LEVEL"),
        ("FIND_FIRST", "PATTERN LEVEL MAX_COUNT COUNT"),
        ("WriteX", "HANDLE OFFSET SIZE RETURNED"),
        ("ReadX", "HANDLE OFFSET SIZE RETURNED"),
        ("LockX", "HANDLE OFFSET SIZE"),
        ("UnlockX", "HANDLE OFFSET SIZE"),
        ("Flush", "HANDLE"),
    ];
    SIGS.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(op))
        .map(|(n, s)| (*n, *s))
}

/// Parses one line: `None` for a line without a call (blank, comment, too
/// short), else the time it is due, the call and whether the recorded
/// status is success.
fn parse_line(
    raw: &str,
    intern: &mut dyn FnMut(TracePath) -> PathId,
) -> Result<Option<(Option<f64>, Call, bool)>, String> {
    let mut f = fields(raw);
    if f.is_empty() || f[0].starts_with('#') {
        return Ok(None);
    }
    if f[0].eq_ignore_ascii_case("SLEEP") {
        let us = f
            .get(1)
            .and_then(|s| number(s))
            .filter(|_| f.len() == 2)
            .ok_or_else(|| format!("SLEEP takes one number of microseconds: {raw}"))?;
        return Ok(Some((None, Call::Sleep { us }, true)));
    }
    refuse_extension(&f[0])?;
    if f.len() < 2 {
        return Ok(None);
    }
    let at = if f[0].starts_with(|c: char| c.is_ascii_digit()) {
        let t: f64 = f[0]
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| format!("{} is neither a call nor a time in seconds", f[0]))?;
        f.remove(0);
        Some(t)
    } else {
        None
    };
    let ok = status_ok(&f.pop().unwrap_or_default())?;
    let op = f.first().cloned().unwrap_or_default();
    let (name, sig) = signature(&op).ok_or_else(|| {
        format!(
            "{op} is not a call fileserver.trace replays (it replays {})",
            KINDS.join(", ")
        )
    })?;
    let args = &f[1..];
    let want = sig.split(' ').count();
    if args.len() != want {
        return Err(format!(
            "{name} takes {want} field(s) before its status ({sig}), this line has {}",
            args.len()
        ));
    }
    let call = Args {
        name,
        fields: args,
        intern,
    }
    .call()?;
    Ok(Some((at, call, ok)))
}

/// Refuses dbench's loadfile extensions by name: they loop, wait or fill
/// buffers, which a replay of the calls alone would get wrong.
fn refuse_extension(op: &str) -> Result<(), String> {
    for kw in [
        "LOOP",
        "ENDLOOP",
        "REPEAT",
        "SETSP",
        "WAITSP",
        "WRITEPATTERN",
        "RANDOMSTRING",
    ] {
        if op.eq_ignore_ascii_case(kw) {
            return Err(format!(
                "{kw} is one of dbench's loadfile extensions that fileserver.trace does not \
                 replay"
            ));
        }
    }
    Ok(())
}

/// Whether a recorded status is success: `NT_STATUS_OK` or a hex zero.
fn status_ok(status: &str) -> Result<bool, String> {
    if status == "NT_STATUS_OK" {
        Ok(true)
    } else if status.starts_with("NT_STATUS_") {
        Ok(false)
    } else if status.starts_with("0x") {
        Ok(number(status).ok_or_else(|| format!("status {status} is not a hex number"))? == 0)
    } else {
        Err(format!(
            "the last field, {status}, is not a status (NT_STATUS_… or 0x…)"
        ))
    }
}

/// The fields of one call before its status, as many as its signature
/// names, with the call's name so that a message says whose field is wrong.
struct Args<'a> {
    name: &'static str,
    fields: &'a [String],
    intern: &'a mut dyn FnMut(TracePath) -> PathId,
}

impl Args<'_> {
    /// A number field, decimal or hex as dbench reads it.
    fn num(&self, i: usize, what: &str) -> Result<u64, String> {
        number(&self.fields[i]).ok_or_else(|| {
            format!(
                "{}'s {what}, {}, is not a number",
                self.name, self.fields[i]
            )
        })
    }

    /// A number that must fit a handle, a count or an I/O size.
    fn small(&self, i: usize, what: &str) -> Result<u32, String> {
        u32::try_from(self.num(i, what)?)
            .map_err(|_| format!("{}'s {what}, {}, is too large", self.name, self.fields[i]))
    }

    /// A read's or write's size: the replay's buffers hold at most
    /// [`MAX_IO`] bytes.
    fn io_size(&self, i: usize) -> Result<u32, String> {
        let n = self.small(i, "size")?;
        if n as usize > MAX_IO {
            return Err(format!(
                "{} of {n} bytes: fileserver.trace replays reads and writes of at most \
                 {MAX_IO} bytes",
                self.name
            ));
        }
        Ok(n)
    }

    /// A path field, rewritten into the client's tree and interned, so a
    /// path named many times is turned into the client's own once.
    fn path(&mut self, i: usize) -> Result<PathId, String> {
        Ok((self.intern)(trace_path(&self.fields[i])?))
    }

    /// The call the fields make; `name` is one of [`signature`]'s.
    fn call(mut self) -> Result<Call, String> {
        Ok(match self.name {
            "NTCreateX" => self.create()?,
            "Close" => Call::Close {
                handle: self.small(0, "handle")?,
            },
            "Rename" => Call::Rename {
                from: self.path(0)?,
                to: self.path(1)?,
            },
            "Unlink" => Call::Unlink {
                path: self.path(0)?,
            },
            "Deltree" => Call::Deltree {
                path: self.path(0)?,
            },
            "Rmdir" => Call::Rmdir {
                path: self.path(0)?,
            },
            "Mkdir" => Call::Mkdir {
                path: self.path(0)?,
            },
            "QUERY_PATH_INFORMATION" => Call::QueryPath {
                path: self.path(0)?,
            },
            "QUERY_FILE_INFORMATION" => Call::QueryFile {
                handle: self.small(0, "handle")?,
            },
            "QUERY_FS_INFORMATION" => Call::QueryFs,
            "SET_FILE_INFORMATION" => Call::SetFileInfo {
                handle: self.small(0, "handle")?,
            },
            "FIND_FIRST" => Call::FindFirst {
                pattern: self.path(0)?,
                max: self.small(2, "maximum count")?,
            },
            "WriteX" | "ReadX" => self.io()?,
            "LockX" | "UnlockX" => self.lock()?,
            _ => Call::Flush {
                handle: self.small(0, "handle")?,
            },
        })
    }

    /// NTCreateX, whose disposition must be one the replay can open with.
    fn create(&mut self) -> Result<Call, String> {
        let disposition = self.small(2, "disposition")?;
        if disposition > FILE_OVERWRITE_IF {
            return Err(format!(
                "NTCreateX's disposition {disposition} is not one of SMB's 0–5"
            ));
        }
        Ok(Call::NtCreateX {
            path: self.path(0)?,
            options: self.small(1, "create options")?,
            disposition,
            handle: self.small(3, "handle")?,
        })
    }

    /// WriteX or ReadX: the same four fields.
    fn io(&self) -> Result<Call, String> {
        let (handle, offset, size, ret) = (
            self.small(0, "handle")?,
            self.num(1, "offset")?,
            self.io_size(2)?,
            self.small(3, "returned size")?,
        );
        Ok(if self.name == "WriteX" {
            Call::WriteX {
                handle,
                offset,
                size,
                ret,
            }
        } else {
            Call::ReadX {
                handle,
                offset,
                size,
                ret,
            }
        })
    }

    /// LockX or UnlockX: the same three fields.
    fn lock(&self) -> Result<Call, String> {
        let (handle, offset, size) = (
            self.small(0, "handle")?,
            self.num(1, "offset")?,
            self.num(2, "size")?,
        );
        Ok(if self.name == "LockX" {
            Call::LockX {
                handle,
                offset,
                size,
            }
        } else {
            Call::UnlockX {
                handle,
                offset,
                size,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::SHORT_TRACE;
    use super::*;

    #[test]
    fn the_parser_reads_dbench_lines() {
        let t = Trace::parse(SHORT_TRACE).unwrap();
        // 38 lines: a comment and SLEEP are no calls.
        assert_eq!(t.lines.len(), 37);
        assert_eq!(t.calls(), 36);
        assert_eq!(t.lines[0].no, 1);
        assert_eq!(t.lines[4].no, 6, "the comment is skipped");
        assert_eq!(
            t.paths[0],
            TracePath::Tree(String::new()),
            "\\clients\\client1 is the client's tree"
        );
        assert_eq!(t.paths[1], TracePath::Clients);
        let Call::NtCreateX {
            path,
            options,
            disposition,
            handle,
        } = t.lines[4].call
        else {
            panic!("{:?}", t.lines[4]);
        };
        assert_eq!(
            t.paths[path.0 as usize],
            TracePath::Tree("missing.txt".into())
        );
        assert_eq!((options, disposition, handle), (0x40, 1, 101));
        assert!(!t.lines[4].ok && t.lines[2].ok);
        assert_eq!(
            t.lines[11].call,
            Call::WriteX {
                handle: 103,
                offset: 65534,
                size: 1,
                ret: 1
            }
        );
        assert_eq!(t.lines[33].call, Call::Sleep { us: 10 });
        assert_eq!(t.count("ReadX"), 3);
        assert_eq!(t.count("Deltree"), 2);
        let Call::Rename { from, to } = t.lines[21].call else {
            panic!("{:?}", t.lines[21]);
        };
        assert_eq!(t.paths[to.0 as usize], TracePath::Tree("sub/b.doc".into()));
        assert_ne!(from, to);

        // A timed loadfile, hex statuses, any case of a call's name.
        let t = Trace::parse("0.5 close 7 0x0\n1.25 Flush 7 0xc0000008\n").unwrap();
        assert_eq!(t.lines[0].at, Some(0.5));
        assert_eq!(t.lines[0].call, Call::Close { handle: 7 });
        assert!(t.lines[0].ok && !t.lines[1].ok);
    }

    #[test]
    fn the_parser_refuses_what_it_cannot_replay_with_the_line() {
        for (text, want) in [
            (
                "Close 1 NT_STATUS_OK\nOpenX 1 NT_STATUS_OK\n",
                "line 2: OpenX is not a call",
            ),
            (
                "Close 1 OK\n",
                "line 1: the last field, OK, is not a status",
            ),
            ("Close NT_STATUS_OK\n", "line 1: Close takes 1 field(s)"),
            (
                "Unlink \"\\other\\x\" 0x6 NT_STATUS_OK\n",
                "outside \\clients\\client1",
            ),
            (
                "Unlink \"\\clients\\client1\\..\\..\\x\" 0 NT_STATUS_OK\n",
                "`..`",
            ),
            (
                "ReadX 1 0 4194304 4194304 NT_STATUS_OK\n",
                "at most 1048576 bytes",
            ),
            ("ReadX 1 * 4 4 NT_STATUS_OK\n", "offset, *, is not a number"),
            ("REPEAT 4\nClose 1 NT_STATUS_OK\n", "line 1: REPEAT"),
            (
                "NTCreateX \"\\clients\\client1\\x\" 0 9 1 NT_STATUS_OK\n",
                "disposition 9",
            ),
            ("# nothing\n\n", "no call to replay"),
        ] {
            let e = Trace::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = Trace::load("relative/client.txt").unwrap_err().to_string();
        assert!(
            e.contains("trace=relative/client.txt: not an absolute path"),
            "{e}"
        );
        let e = Trace::load("/nonexistent/client.txt")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("trace=/nonexistent/client.txt: cannot read it")
                && e.contains("accepted:"),
            "{e}"
        );
    }
}
