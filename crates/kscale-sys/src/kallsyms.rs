//! Kernel symbol table from `/proc/kallsyms`, for turning sampled kernel
//! instruction pointers into routine names (docs/method.md).

use anyhow::{bail, Context, Result};

/// Text symbols sorted by address; a lookup finds the routine whose start is
/// the greatest address not above the sampled one.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms`. Fails when the addresses are hidden
    /// (`kernel.kptr_restrict`, or not running with CAP_SYSLOG), since every
    /// sample would then resolve to nothing.
    pub fn load() -> Result<Kallsyms> {
        let text =
            std::fs::read_to_string("/proc/kallsyms").context("cannot read /proc/kallsyms")?;
        let k = Kallsyms::parse(&text);
        if k.syms.is_empty() {
            bail!(
                "/proc/kallsyms shows no addresses (kernel.kptr_restrict, or kscale lacks \
                 CAP_SYSLOG): kernel samples stay unresolved"
            );
        }
        Ok(k)
    }

    /// Parses kallsyms text: `ADDRESS TYPE NAME [MODULE]`. Keeps code
    /// symbols (types t, T, w, W) and drops the `__pfx_` padding that
    /// precedes functions in kernels built with call-depth tracking, and
    /// zero addresses (hidden).
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms = Vec::new();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") || name.starts_with("__pfx_") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            syms.push((addr, name.to_string()));
        }
        syms.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        // Aliases at one address (`_stext`, `_text`, …): keep the first.
        syms.dedup_by_key(|s| s.0);
        Kallsyms { syms }
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The routine containing `addr`, or None below the first symbol.
    pub fn resolve(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        if i == 0 {
            return None;
        }
        Some(self.syms[i - 1].1.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81001000 t do_one
ffffffff81001ff0 T __pfx_do_two
ffffffff81002000 T do_two
ffffffff81003000 D some_data
ffffffff81004000 W weak_fn
ffffffffc0000000 t ext4_thing	[ext4]
garbage
0000000000000000 T hidden
";

    #[test]
    fn parses_sorts_and_resolves() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.len(), 5);
        assert_eq!(k.resolve(0xffffffff80ffffff), None);
        assert_eq!(k.resolve(0xffffffff81000000), Some("_stext"));
        assert_eq!(k.resolve(0xffffffff81001000), Some("do_one"));
        // Inside do_one's padding tail: __pfx_ symbols are skipped.
        assert_eq!(k.resolve(0xffffffff81001ff8), Some("do_one"));
        assert_eq!(k.resolve(0xffffffff81002abc), Some("do_two"));
        // Data symbols are not routines.
        assert_eq!(k.resolve(0xffffffff81003010), Some("do_two"));
        assert_eq!(k.resolve(0xffffffff81004001), Some("weak_fn"));
        assert_eq!(k.resolve(0xffffffffc0000100), Some("ext4_thing"));
    }

    #[test]
    fn hidden_addresses_give_an_empty_table() {
        let k = Kallsyms::parse("0000000000000000 T a\n0000000000000000 t b\n");
        assert!(k.is_empty());
    }

    #[test]
    fn reads_this_machine_or_explains() {
        match Kallsyms::load() {
            Ok(k) => assert!(k.len() > 100),
            Err(e) => eprintln!("skipping: {e:#}"),
        }
    }
}
